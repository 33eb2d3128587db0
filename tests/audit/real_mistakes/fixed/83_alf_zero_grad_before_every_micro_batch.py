# Fixed version of ../83_alf_zero_grad_before_every_micro_batch.py: silent on the codes that file expects.
import torch  # noqa: F401


def train_iter(algorithm, optimizer, experience, grad_acc_steps, counter):
    loss = algorithm.loss(experience) / grad_acc_steps
    loss.backward()
    if (counter + 1) % grad_acc_steps == 0:
        optimizer.step()
        optimizer.zero_grad()  # not: TB103


def train(algorithm, optimizer, replay, grad_acc_steps, iterations):
    for counter in range(iterations):
        train_iter(algorithm, optimizer, replay.sample(), grad_acc_steps, counter)
