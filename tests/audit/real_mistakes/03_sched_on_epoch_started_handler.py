# Reconstructed after michuanhaohao/reid-strong-baseline issue #190 ("Detected call of lr_scheduler.step()
# before optimizer.step()"): the ignite trainer stepped the scheduler in an EPOCH_STARTED handler, i.e. before
# the epoch's optimizer steps; the suggested fix is EPOCH_COMPLETED.
from ignite.engine import Engine, Events


def do_train(model, train_loader, optimizer, scheduler, loss_fn, epochs):
    def update(engine, batch):
        model.train()
        optimizer.zero_grad()
        img, target = batch
        score, feat = model(img)
        loss = loss_fn(score, feat, target)
        loss.backward()
        optimizer.step()
        return loss.item()

    trainer = Engine(update)

    @trainer.on(Events.EPOCH_STARTED)
    def adjust_learning_rate(engine):
        scheduler.step()  # expect: TB101

    trainer.run(train_loader, max_epochs=epochs)
