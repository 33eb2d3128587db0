# Reconstructed after tatsu-lab/alpaca_farm issue #57 ("Possible issue with gradient accumulation"; the maintainer:
# "You're absolutely correct. The AcceleratedOptimizer object has the right wraps that disable zero_grad on non-sync
# steps, and should be used for clearing gradients, as opposed to the wrapped model"): inside
# accelerator.accumulate the model's own zero_grad ran on every micro-batch and erased the accumulated gradients.
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
            policy.zero_grad(set_to_none=True)  # expect: TB103
