import torch


def train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion,
          max_length=10, teacher_forcing=True):
    encoder_hidden = encoder.initHidden()
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    loss = 0
    encoder_outputs = torch.zeros(max_length, encoder.hidden_size)
    for ei in range(input_tensor.size(0)):
        encoder_output, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
        encoder_outputs[ei] = encoder_output[0, 0]
    decoder_hidden = encoder_hidden
    decoder_input = torch.tensor([[0]])
    for di in range(target_tensor.size(0)):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
        loss += criterion(decoder_output, target_tensor[di])
        decoder_input = target_tensor[di]
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item() / target_tensor.size(0)


def train_iters(encoder, decoder, pairs, n_iters, criterion, learning_rate=0.01):
    encoder_optimizer = torch.optim.SGD(encoder.parameters(), lr=learning_rate)
    decoder_optimizer = torch.optim.SGD(decoder.parameters(), lr=learning_rate)
    plot_losses = []
    for it in range(1, n_iters + 1):
        inp, tgt = pairs[it - 1]
        plot_losses.append(train(inp, tgt, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion))
    return plot_losses
