# Reconstructed after ajhamdi/MVTN issue #2 ("Memory leak": the process was killed in the second epoch; the reporter
# changed "total_loss += loss" to "total_loss += loss.item()", and the maintainer "updated the code as per your
# recommendations"): the epoch's running loss summed the graph-carrying loss tensors.
import torch  # noqa: F401


def train_epoch(mvnetwork, mvtn, mvrenderer, optimizer, criterion, data_loader, device):
    mvnetwork.train()
    mvtn.train()
    total_loss = 0.0
    n = 0
    for targets, meshes, points in data_loader:
        azim, elev, dist = mvtn(points, c_batch_size=len(targets))
        rendered_images, _ = mvrenderer(meshes, points, azim=azim, elev=elev, dist=dist)
        outputs = mvnetwork(rendered_images)[0]
        loss = criterion(outputs, targets.to(device).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss  # expect: TB204
        n += 1
    return total_loss / n
