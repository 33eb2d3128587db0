# Reconstructed after runame/laplace-redux PR #1 ("Fix bug where softmax is applied twice in classification", merged, https://github.com/runame/laplace-redux/pull/1): test() in utils/test.py collects predictive probabilities (the MAP logits are already turned into probabilities with softmax after aggregation), but then computed the confidence and the predictions with torch.max(all_y_prob.softmax(dim=1), 1), applying softmax a second time, which flattened the reported mean confidence. The fix takes torch.max(all_y_prob, 1) directly and asserts the rows sum to one.
# Fixed version (the merged PR applied).
from tqdm import tqdm
import torch
from torch import nn

from utils.utils import mixture_model_pred


@torch.no_grad()
def test(components, test_loader, prediction_mode, pred_type='glm', n_samples=100,
         link_approx='probit', no_loss_acc=False, device='cpu'):

    temperature_scaling_model = None
    if prediction_mode in ['map', 'laplace', 'bbb', 'csghmc']:
        model = components[0]
        if prediction_mode in ['map', 'bbb']:
            if prediction_mode == 'map' and isinstance(model, tuple):
                model, temperature_scaling_model = model[0], model[1]
            model.eval()
        elif prediction_mode == 'csghmc':
            for m in model:
                m.eval()

    loss_fn = nn.NLLLoss()

    all_y_true = list()
    all_y_prob = list()
    for data in tqdm(test_loader):
        x, y = data[0].to(device), data[1].to(device)
        all_y_true.append(y.cpu())

        if prediction_mode in ['ensemble', 'mola', 'multi-swag']:
            K = len(components)
            pi = torch.ones(K, device=device) / K
            y_prob = mixture_model_pred(
                components, x, pi, prediction_mode=prediction_mode, pred_type=pred_type,
                link_approx=link_approx, n_samples=n_samples)

        elif prediction_mode == 'laplace':
            y_prob = model(x, pred_type=pred_type, link_approx=link_approx, n_samples=n_samples)

        elif prediction_mode == 'map':
            y_prob = model(x).detach()

        elif prediction_mode == 'bbb':
            y_prob = torch.stack([model(x)[0].softmax(-1) for _ in range(10)]).mean(0)

        elif prediction_mode == 'csghmc':
            y_prob = torch.stack([m(x).softmax(-1) for m in model]).mean(0)

        else:
            raise ValueError('Choose one out of: map, ensemble, laplace, mola, bbb, csghmc, multi-swag.')

        all_y_prob.append(y_prob.cpu())

    all_y_prob = torch.cat(all_y_prob, dim=0)
    all_y_true = torch.cat(all_y_true, dim=0)

    if temperature_scaling_model is not None:
        all_y_prob = torch.from_numpy(temperature_scaling_model.predict_proba(all_y_prob.numpy()))
    elif prediction_mode == "map":
        all_y_prob = all_y_prob.softmax(dim=1)

    metrics = {}
    assert all_y_prob.sum(-1).mean() == 1, '`all_y_prob` are logits but probs. are required'  # not: TB???
    c, preds = torch.max(all_y_prob, 1)
    metrics['conf'] = c.mean().item()

    if not no_loss_acc:
        metrics['nll'] = loss_fn(all_y_prob.log(), all_y_true).item()
        metrics['acc'] = (all_y_true == preds).float().mean().item()

    return metrics, all_y_prob
