# Fixed version of ../58_idinvert_discriminator_never_zeroed.py: silent on the codes that file expects.
def training_loop(E, G, D, optimizer_E, optimizer_D, loader, loss_adv_d, loss_enc, iterations):
    for it, x in zip(range(iterations), loader):  # noqa: B007
        # discriminator step
        optimizer_D.zero_grad()
        w = E(x)
        x_rec = G(w).detach()
        loss_d = loss_adv_d(D(x), D(x_rec))
        loss_d.backward()
        optimizer_D.step()  # not: TB104
        # encoder step
        optimizer_E.zero_grad()
        x_rec = G(E(x))
        loss_e = loss_enc(x, x_rec, D(x_rec))
        loss_e.backward()
        optimizer_E.step()
