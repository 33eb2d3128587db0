# Reconstructed after huggingface/transformers issue #340 ("optimizer.zero_grad() in run_openai_gpt.py?"; the
# maintainer: "Oh that's a mistake indeed, thanks for pointing out. Fixed on master."): the fine-tuning example
# stepped the optimizer after every batch without ever zeroing the gradients, so every update summed all earlier ones.
import torch  # noqa: F401


def finetune(model, optimizer, train_dataloader, device, epochs, lm_coef):
    model.train()
    for _ in range(epochs):
        tr_loss = 0.0
        for batch in train_dataloader:
            input_ids, mc_token_ids, lm_labels, mc_labels = (t.to(device) for t in batch)
            losses = model(input_ids, mc_token_ids, lm_labels, mc_labels)
            loss = lm_coef * losses[0] + losses[1]
            loss.backward()
            optimizer.step()  # expect: TB104
            tr_loss += loss.item()
    return tr_loss
