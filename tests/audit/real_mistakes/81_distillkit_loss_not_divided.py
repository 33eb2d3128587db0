# Reconstructed after agokrani/distillKitPlus issue #5 ("Normalize Loss by Gradient Accumulation Steps Absent": the
# back-propagated loss is summed across the accumulated batches), fixed by the maintainer in PR #6: each
# micro-batch's mean loss was back-propagated whole, so the update grew with gradient_accumulation_steps.
import torch  # noqa: F401


def train(student, teacher, optimizer, loader, gradient_accumulation_steps, distill_loss):
    student.train()
    for step, batch in enumerate(loader):
        with torch.no_grad():
            teacher_logits = teacher(batch["input_ids"])
        loss = distill_loss(student(batch["input_ids"]), teacher_logits, batch["labels"])
        loss.backward()  # expect: TB105
        if (step + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
