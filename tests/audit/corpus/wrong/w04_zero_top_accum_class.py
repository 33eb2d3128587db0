import torch
import torch.nn.functional as F


class Finetuner:
    def __init__(self, model, loader, accumulate=4):
        self.model = model
        self.loader = loader
        self.accumulate = accumulate
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)

    def epoch(self):
        self.model.train()
        for step, (ids, labels) in enumerate(self.loader):
            self.optimizer.zero_grad()  # expect: TB103
            logits = self.model(ids)
            loss = F.cross_entropy(logits, labels) / self.accumulate
            loss.backward()
            if (step + 1) % self.accumulate == 0:
                self.optimizer.step()
