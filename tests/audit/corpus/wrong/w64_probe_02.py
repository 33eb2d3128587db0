import torch

def run(model, data_iter, solver_params, total=1000, grad_accum_steps=8):
    optim = torch.optim.Adam(model.parameters(), **solver_params)
    global_step = 0
    while global_step < total:
        batch = next(data_iter)
        optim.zero_grad()  # expect: TB103
        out = model(batch["x"])
        loss = torch.nn.functional.mse_loss(out, batch["y"]) / grad_accum_steps
        loss.backward()
        global_step += 1
        if global_step % grad_accum_steps == 0:
            optim.step()
