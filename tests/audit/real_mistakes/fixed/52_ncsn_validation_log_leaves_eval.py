# Fixed version of ../52_ncsn_validation_log_leaves_eval.py: silent on the codes that file expects.
import torch


def train(score, optimizer, dataloader, test_iter, sigmas, anneal_dsm_loss, n_epochs, log_every):
    step = 0
    for epoch in range(n_epochs):  # noqa: B007
        for X, y in dataloader:  # noqa: B007
            step += 1
            score.train()
            labels = torch.randint(0, len(sigmas), (X.shape[0],))
            loss = anneal_dsm_loss(score, X, labels, sigmas)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % log_every == 0:
                score.eval()  # not: TB202
                test_X, _ = next(test_iter)
                test_labels = torch.randint(0, len(sigmas), (test_X.shape[0],))
                with torch.no_grad():
                    test_loss = anneal_dsm_loss(score, test_X, test_labels, sigmas)
                score.train()
                print(step, loss.item(), test_loss.item())
