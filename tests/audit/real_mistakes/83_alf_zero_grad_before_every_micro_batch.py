# Reconstructed after HorizonRobotics/alf PR #1788 ("fix grad accumulation": "we always call optimizer.zero_grad()
# before each optimizer step. However, this step should be ignored before the grad is actually applied if we have
# grad acc steps > 1", merged): the gradients were cleared before every micro-batch, so accumulation kept only the
# last one.
import torch  # noqa: F401


def train_iter(algorithm, optimizer, experience, grad_acc_steps, counter):
    optimizer.zero_grad()  # expect: TB103
    loss = algorithm.loss(experience) / grad_acc_steps
    loss.backward()
    if (counter + 1) % grad_acc_steps == 0:
        optimizer.step()


def train(algorithm, optimizer, replay, grad_acc_steps, iterations):
    for counter in range(iterations):
        train_iter(algorithm, optimizer, replay.sample(), grad_acc_steps, counter)
