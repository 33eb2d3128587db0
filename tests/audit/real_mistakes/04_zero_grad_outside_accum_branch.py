# Reconstructed after gaozhihan/PreDiff issue #32 ("Timing to call .zero_grad()") fixed by PR #33: in the VAE
# training script zero_grad() sat outside the accumulation `if`, so it ran on every micro-batch and erased the
# gradients being accumulated; the fix moved it after step() inside the `if`.
def training_step(vae, discriminator, batch, batch_idx, opt_ae, opt_disc, accumulate_grad_batches, manual_backward):
    inputs = batch
    reconstructions, posterior = vae(inputs)
    aeloss = (inputs - reconstructions).abs().mean() + posterior.kl().mean()
    manual_backward(aeloss / accumulate_grad_batches)
    opt_ae.zero_grad()  # expect: TB103
    if (batch_idx + 1) % accumulate_grad_batches == 0:
        opt_ae.step()
    discloss = discriminator(inputs.detach(), reconstructions.detach())
    manual_backward(discloss / accumulate_grad_batches)
    if (batch_idx + 1) % accumulate_grad_batches == 0:
        opt_disc.step()
        opt_disc.zero_grad()
    return aeloss
