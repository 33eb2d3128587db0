# Reconstructed after pai4451/ML2021 issue #2 ("HW7 Out of memory": `train_loss += output.loss` stores the complete
# computation graph until CPU RAM runs out, `.detach()` or `.item()` solves it; the repository's author:
# "Tensor.detach() detached tensor from the current graph. This helps prevent memory leak."): the question-answering
# fine-tuning loop summed the model's loss tensors between two logging steps.
import torch


def train(model, train_loader, optimizer, num_epoch, logging_step, device):
    model.train()
    for epoch in range(num_epoch):
        step = 1
        train_loss = train_acc = 0
        for data in train_loader:
            data = [i.to(device) for i in data]
            output = model(
                input_ids=data[0],
                token_type_ids=data[1],
                attention_mask=data[2],
                start_positions=data[3],
                end_positions=data[4],
            )
            start_index = torch.argmax(output.start_logits, dim=1)
            end_index = torch.argmax(output.end_logits, dim=1)
            train_acc += ((start_index == data[3]) & (end_index == data[4])).float().mean()
            train_loss += output.loss  # expect: TB204
            output.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % logging_step == 0:
                print(f"Epoch {epoch + 1} | Step {step} | loss = {train_loss.item() / logging_step:.3f}")
                train_loss = train_acc = 0
