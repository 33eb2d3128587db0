# Reconstructed after ApolloResearch/e2e_sae PR #70 ("Divide loss by grad accumulation steps", merged; it reverts
# #68, which had removed the division): every micro-batch's mean loss was backpropagated as is, so the
# accumulated gradient was gradient_accumulation_steps times too large.
def train(model, optimizer, scheduler, loader, gradient_accumulation_steps):
    for batch_idx, batch in enumerate(loader):
        loss = model(batch)
        loss.backward()  # expect: TB105
        if (batch_idx + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
