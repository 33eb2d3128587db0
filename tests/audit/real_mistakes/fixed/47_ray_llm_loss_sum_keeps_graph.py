# Fixed version of ../47_ray_llm_loss_sum_keeps_graph.py: silent on the codes that file expects.


def training_function_fixed(model, optimizer, lr_scheduler, train_dataloader, accelerator, num_epochs):
    for epoch in range(num_epochs):
        loss_total = 0.0
        model.train()
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                loss_total += loss.item()  # not: TB204
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
        print(epoch, loss_total / len(train_dataloader))
