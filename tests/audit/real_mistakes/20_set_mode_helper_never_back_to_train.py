# Reconstructed after facebookresearch/clevr-iep PR #22 ("Fix potential problem for training"): check_accuracy
# put the models in eval mode through set_mode('eval', ...) and never set them back to train mode, so training
# after the first accuracy check ran with dropout/BatchNorm in eval mode.
import torch


def set_mode(mode, models):
    for m in models:
        if m is None:
            continue
        if mode == "train":
            m.train()
        if mode == "eval":
            m.eval()


def check_accuracy(program_generator, execution_engine, loader):
    set_mode("eval", [program_generator, execution_engine])  # expect: TB202
    num_correct = 0
    with torch.no_grad():
        for questions, feats, answers in loader:
            programs = program_generator.reinforce_sample(questions)
            scores = execution_engine(feats, programs)
            num_correct += (scores.argmax(1) == answers).sum().item()
    return num_correct


def train_loop(program_generator, execution_engine, optimizer, loss_fn, train_loader, val_loader, check_every):
    set_mode("train", [program_generator, execution_engine])
    for t, (questions, feats, answers) in enumerate(train_loader):
        optimizer.zero_grad()
        scores = execution_engine(feats, program_generator(questions))
        loss = loss_fn(scores, answers)
        loss.backward()
        optimizer.step()
        if t % check_every == 0:
            check_accuracy(program_generator, execution_engine, val_loader)  # also-ok: TB202
