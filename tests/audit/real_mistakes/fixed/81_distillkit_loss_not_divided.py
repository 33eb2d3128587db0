# Fixed version of ../81_distillkit_loss_not_divided.py: silent on the codes that file expects.
import torch  # noqa: F401


def train(student, teacher, optimizer, loader, gradient_accumulation_steps, distill_loss):
    student.train()
    for step, batch in enumerate(loader):
        with torch.no_grad():
            teacher_logits = teacher(batch["input_ids"])
        loss = distill_loss(student(batch["input_ids"]), teacher_logits, batch["labels"])
        loss = loss / gradient_accumulation_steps
        loss.backward()  # not: TB105
        if (step + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
