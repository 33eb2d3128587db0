from torch import optim


def groups_of(model):
    return [{"params": model.a.parameters()}, {"parameter": model.b.parameters(), "lr": 1e-3}]  # expect: TB301


class Builder:
    def __init__(self, model):
        self.groups = [dict(params=model.a.parameters()), dict(parmas=model.b.parameters())]  # expect: TB301

    def build(self):
        return optim.AdamW(self.groups, lr=1e-3)


def appended(model):
    pg = []
    pg.append({"params": model.a.parameters(), "learning_rate": 1e-2})  # expect: TB301
    pg += [{"param": model.b.parameters()}]  # expect: TB301
    return optim.SGD(params=pg, lr=0.1)


def from_helper(model):
    return optim.SGD(groups_of(model), lr=0.1)
