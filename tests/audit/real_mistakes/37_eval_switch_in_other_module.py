# Reconstructed after joeynmt/joeynmt issue #184 ("model.eval()"), in its two-module shape: training.py calls
# prediction.validate_on_data() every validation_freq steps; that helper (in _joeynmt_prediction.py here) sets
# model.eval(), and model.train() is only called at the start of each epoch, so the rest of the epoch trains in
# eval mode. Same mistake as 19_..., but the switch is in another module.
from _joeynmt_prediction import validate_on_data


def train_and_validate(model, optimizer, loss_function, train_data, valid_data, epochs, validation_freq):
    steps = 0
    for _epoch in range(epochs):
        model.train()
        for src, trg in train_data:
            loss = loss_function(model(src), trg)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
            if steps % validation_freq == 0:
                validate_on_data(model, valid_data, loss_function)  # expect: TB202
