# Reconstructed after hszhao/semseg issue #60 ('"out of memory" during validation'): validate() set
# model.eval() but ran the forward pass with gradients enabled, building graphs during validation; the
# suggested fix wraps the forward in torch.no_grad().
def validate(val_loader, model, criterion, intersection_and_union):
    model.eval()
    loss_sum, n = 0.0, 0
    for _i, (input, target) in enumerate(val_loader):
        input = input.cuda(non_blocking=True)
        target = target.cuda(non_blocking=True)
        output = model(input)  # expect: TB203
        loss = criterion(output, target)
        loss_sum += loss.item() * input.size(0)
        n += input.size(0)
        intersection_and_union(output.max(1)[1], target)
    return loss_sum / n
