# Reconstructed after Hsintien-Ng/idinvert_pytorch-reproduced issue #1 ("optimizer_D.zero_grad() missing?"; the
# maintainer: "You're right. Sorry I forgot to add it. I have fixed it."): the encoder training loop zeroed the
# encoder's optimizer but never the discriminator's, so D's gradients piled up over the iterations.
def training_loop(E, G, D, optimizer_E, optimizer_D, loader, loss_adv_d, loss_enc, iterations):
    for it, x in zip(range(iterations), loader):  # noqa: B007
        # discriminator step
        w = E(x)
        x_rec = G(w).detach()
        loss_d = loss_adv_d(D(x), D(x_rec))
        loss_d.backward()
        optimizer_D.step()  # expect: TB104
        # encoder step
        optimizer_E.zero_grad()
        x_rec = G(E(x))
        loss_e = loss_enc(x, x_rec, D(x_rec))
        loss_e.backward()
        optimizer_E.step()
