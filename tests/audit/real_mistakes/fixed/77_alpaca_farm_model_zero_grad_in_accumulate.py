# Fixed version of ../77_alpaca_farm_model_zero_grad_in_accumulate.py: silent on the codes that file expects.
import torch  # noqa: F401


def step_with_rollouts(accelerator, policy, optimizer, rollouts, max_grad_norm, compute_loss):
    policy.train()
    for batch in rollouts:
        with accelerator.accumulate(policy):
            loss = compute_loss(policy, batch)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(policy.parameters(), max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)  # not: TB103
