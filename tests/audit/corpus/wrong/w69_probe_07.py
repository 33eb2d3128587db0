def train(net, loader, opt, loss_fn, evaluate):
    for epoch in range(10):
        for x, y in loader:
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
        net.train(False)  # expect: TB202
        evaluate(net)
