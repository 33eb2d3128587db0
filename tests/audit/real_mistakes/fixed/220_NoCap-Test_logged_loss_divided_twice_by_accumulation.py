# Reconstructed after BottleCapAI/NoCap-Test PR #2 ("Fix logged train_loss double-division with gradient accumulation", merged, https://github.com/BottleCapAI/NoCap-Test/pull/2): in train_gpt2.py each micro-step loss was already scaled by 1/grad_accumulation_steps before being added to train_loss, and after the micro-step loop train_loss was divided by grad_accumulation_steps a second time, so the logged/printed training loss was grad_accumulation_steps times too small (e.g. 0.34 instead of 10.9 with 32 steps) while validation loss was correct. The merged fix deletes the second division.
# Fixed version (the merged PR applied).
import os
import time

import torch
import torch.distributed as dist


def train(args, model, raw_model, optimizer, train_loader, val_loader, val_steps, ctx,
          device, master_process, logfile, print0):
    def get_lr(it):
        assert it <= args.num_iterations
        if it < args.warmup_iters:
            return args.learning_rate * (it + 1) / args.warmup_iters
        elif it < args.num_iterations - args.warmdown_iters:
            return args.learning_rate
        else:
            decay_ratio = (args.num_iterations - it) / args.warmdown_iters
            return args.learning_rate * decay_ratio

    x, y = train_loader.next_batch()
    training_time_ms = 0.0
    torch.cuda.synchronize()
    t0 = time.perf_counter()

    for step in range(args.num_iterations + 1):
        last_step = step == args.num_iterations

        if args.val_loss_every > 0 and (step % args.val_loss_every == 0 or last_step):
            torch.cuda.synchronize()
            training_time_ms += 1000 * (time.perf_counter() - t0)
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss = 0.0
                for _ in range(val_steps):
                    x_val, y_val = val_loader.next_batch()
                    _, loss = model(x_val, y_val, return_logits=False)
                    val_loss += loss
                dist.all_reduce(val_loss, op=dist.ReduceOp.AVG)
                val_loss /= val_steps
            print0(f"step:{step}/{args.num_iterations} | val loss {val_loss:.6f}")
            if master_process and logfile is not None:
                with open(logfile, "a") as f:
                    f.write("s:%d val:%f\n" % (step, val_loss))
            torch.cuda.synchronize()
            t0 = time.perf_counter()

        if last_step:
            break

        model.train()
        train_loss = torch.zeros(1, device=device)
        for micro_step in range(args.grad_accumulation_steps):
            model.require_backward_grad_sync = (
                micro_step == args.grad_accumulation_steps - 1
            )
            with ctx:
                _, loss = model(x, y, return_logits=False)
                loss = (
                    loss / args.grad_accumulation_steps
                )
                train_loss += loss.detach()
            x, y = train_loader.next_batch()
            loss.backward()  # not: TB???

        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        torch.cuda.synchronize()
        approx_training_time_ms = training_time_ms + 1000 * (time.perf_counter() - t0)
        dist.all_reduce(train_loss, op=dist.ReduceOp.AVG)
        lossf = train_loss.item()
        print0(
            f"step:{step}/{args.num_iterations} | loss {lossf:.6f} | train_time:{approx_training_time_ms/1000:.2f}s"
        )
        if master_process and logfile is not None:
            with open(logfile, "a") as f:
                f.write("s:%d trn:%f\n" % (step, lossf))

        if master_process and (step + 1) % args.save_every == 0:
            log = dict(model=raw_model.state_dict(), args=args.__dict__)
            os.makedirs("logs/run", exist_ok=True)
            torch.save(log, "logs/run/model_step%06d.pt" % step)
