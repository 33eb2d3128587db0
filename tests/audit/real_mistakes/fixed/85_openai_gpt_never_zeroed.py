# Fixed version of ../85_openai_gpt_never_zeroed.py: silent on the codes that file expects.
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
            optimizer.step()  # not: TB104
            optimizer.zero_grad()
            tr_loss += loss.item()
    return tr_loss
