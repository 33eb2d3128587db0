# Reconstructed after chickenbestlover/RNN-Time-series-Anomaly-Detection issue #35 ("[BUG]: Model saving logic is wrong", closed-as-fixed, https://github.com/chickenbestlover/RNN-Time-series-Anomaly-Detection/issues/35): in 1_train_predictor.py the best checkpoint was chosen with is_best = val_loss > best_val_loss and best_val_loss = max(val_loss, best_val_loss) (starting from 0), so the model with the highest validation loss was kept as best. The fix (commit da4b221) starts from float('inf') and uses < and min.
import time
import torch
import torch.nn as nn
from torch import optim
from pathlib import Path
import preprocess_data
from model import model
from config import args

TimeseriesData = preprocess_data.PickleDataLoad(data_type=args.data, filename=args.filename, augment_test_data=args.augment)
train_dataset = TimeseriesData.batchify(args, TimeseriesData.trainData, args.batch_size)
test_dataset = TimeseriesData.batchify(args, TimeseriesData.testData, args.eval_batch_size)
feature_dim = TimeseriesData.trainData.size(1)
model = model.RNNPredictor(rnn_type=args.model, enc_inp_size=feature_dim, rnn_inp_size=args.emsize,
                           rnn_hid_size=args.nhid, dec_out_size=feature_dim, nlayers=args.nlayers,
                           dropout=args.dropout, tie_weights=args.tied,
                           res_connection=args.res_connection).to(args.device)
optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
criterion = nn.MSELoss()


def get_batch(args, source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len]
    return data, target


def train(args, model, train_dataset, epoch):
    with torch.enable_grad():
        model.train()
        total_loss = 0
        hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_dataset.size(0) - 1, args.bptt)):
            inputSeq, targetSeq = get_batch(args, train_dataset, i)
            hidden = model.repackage_hidden(hidden)
            optimizer.zero_grad()
            outSeq, hidden = model.forward(inputSeq, hidden)
            loss = criterion(outSeq.view(args.batch_size, -1), targetSeq.view(args.batch_size, -1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            total_loss += loss.item()
            if batch % args.log_interval == 0 and batch > 0:
                print('| epoch {:3d} | {:5d} batches | loss {:5.2f} '.format(
                    epoch, batch, total_loss / args.log_interval))
                total_loss = 0


def evaluate(args, model, test_dataset):
    model.eval()
    with torch.no_grad():
        total_loss = 0
        hidden = model.init_hidden(args.eval_batch_size)
        nbatch = 1
        for nbatch, i in enumerate(range(0, test_dataset.size(0) - 1, args.bptt)):
            inputSeq, targetSeq = get_batch(args, test_dataset, i)
            outSeq, hidden = model.forward(inputSeq, hidden)
            loss = criterion(outSeq.view(args.batch_size, -1), targetSeq.view(args.batch_size, -1))
            total_loss += loss.item()
    return total_loss / (nbatch + 1)


if args.resume or args.pretrained:
    checkpoint = torch.load(Path('save', args.data, 'checkpoint', args.filename).with_suffix('.pth'))
    args, start_epoch, best_val_loss = model.load_checkpoint(args, checkpoint, feature_dim)
    optimizer.load_state_dict(checkpoint['optimizer'])
    del checkpoint
    epoch = start_epoch
else:
    epoch = 1
    start_epoch = 1
    best_val_loss = 0
    print("=> Start training from scratch")

if not args.pretrained:
    try:
        for epoch in range(start_epoch, args.epochs + 1):
            epoch_start_time = time.time()
            train(args, model, train_dataset, epoch)
            val_loss = evaluate(args, model, test_dataset)
            print('| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.4f} | '.format(
                epoch, (time.time() - epoch_start_time), val_loss))

            if epoch % args.save_interval == 0:
                is_best = val_loss > best_val_loss  # expect: TB???
                best_val_loss = max(val_loss, best_val_loss)  # expect: TB???
                model_dictionary = {'epoch': epoch,
                                    'best_loss': best_val_loss,
                                    'state_dict': model.state_dict(),
                                    'optimizer': optimizer.state_dict(),
                                    'args': args
                                    }
                model.save_checkpoint(model_dictionary, is_best)
    except KeyboardInterrupt:
        print('Exiting from training early')
