# Fixed version of ../99_mvtn_total_loss_keeps_graph.py: silent on the codes that file expects.
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
        total_loss += loss.item()  # not: TB204
        n += 1
    return total_loss / n
