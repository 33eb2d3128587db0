# Fixed version of ../101_robustdg_test_accuracy_in_train_mode.py: silent on the codes that file expects.
import torch


class BaseAlgo:
    def __init__(self, args, phi, opt, train_dataset, val_dataset, test_dataset, cuda):
        self.args = args
        self.phi = phi
        self.opt = opt
        self.train_dataset = train_dataset
        self.val_dataset = val_dataset
        self.test_dataset = test_dataset
        self.cuda = cuda

    def get_test_accuracy(self, case):
        dataset = self.val_dataset if case == "val" else self.test_dataset
        test_acc, test_size = 0, 0
        self.phi.eval()
        for x_e, y_e, _d_e, _idx_e, _obj_e in dataset["data_loader"]:
            with torch.no_grad():
                x_e = x_e.to(self.cuda)
                y_e = torch.argmax(y_e, dim=1).to(self.cuda)
                out = self.phi(x_e)  # not: TB201
                test_acc += torch.sum(torch.argmax(out, dim=1) == y_e).item()
                test_size += y_e.shape[0]
        return 100 * test_acc / test_size


class ErmMatch(BaseAlgo):
    def train(self):
        for _ in range(self.args.epochs):
            self.phi.train()
            for x_e, y_e, _d_e, _idx_e, _obj_e in self.train_dataset["data_loader"]:
                self.opt.zero_grad()
                out = self.phi(x_e.to(self.cuda))
                loss = torch.nn.functional.cross_entropy(out, torch.argmax(y_e, dim=1).to(self.cuda))
                loss.backward()
                self.opt.step()
            self.get_test_accuracy("val")
            self.get_test_accuracy("test")
