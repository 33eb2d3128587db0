# Reconstructed after swookey-thinky/xdiffusion issue #7 ("CausalVideoAutoencoder does not have the `load_checkpoint`", fixed in commit 6bb9e1b, https://github.com/swookey-thinky/xdiffusion/issues/7): the video autoencoder trainer saved vae.state_dict() after accelerator.prepare() had wrapped the model, so every checkpoint's keys carried the DDP/compile wrapper prefix ("module.") and could not be loaded back into the bare CausalVideoAutoencoder on resume. The maintainer's fix saves accelerator.unwrap_model(vae).state_dict() and loads the checkpoint with torch.load(..., map_location="cpu") + load_state_dict.
# Fixed version (the merged PR applied).
import torch
from accelerate import Accelerator, DataLoaderConfiguration, DistributedDataParallelKwargs
from torch.utils.data import DataLoader
from tqdm import tqdm

from xdiffusion.datasets import load_dataset
from xdiffusion.utils import cycle, instantiate_from_config

OUTPUT_NAME = "output/video/autoencoder"


def train(config, num_training_steps, batch_size, save_and_sample_every_n, resume_from=None, mixed_precision="no"):
    ddp_kwargs = DistributedDataParallelKwargs(find_unused_parameters=False, broadcast_buffers=False)
    accelerator = Accelerator(
        dataloader_config=DataLoaderConfiguration(split_batches=False),
        mixed_precision=mixed_precision,
        kwargs_handlers=[ddp_kwargs],
        step_scheduler_with_optimizer=False,
    )

    # Instantiate the VAE we are training
    vae = instantiate_from_config(config.vae_config, use_config_struct=True)

    if resume_from:
        checkpoint = torch.load(resume_from, map_location="cpu")
        vae.load_state_dict(checkpoint["model_state_dict"])

    with accelerator.main_process_first():
        dataset, _ = load_dataset(dataset_name=config.training.dataset, config=config.data, split="train")
    dataloader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=1)

    optimizers = vae.configure_optimizers(learning_rate=4.5e-6)

    # Load the optimizers if we have them from the checkpoint
    if resume_from:
        checkpoint = torch.load(resume_from, map_location="cpu")
        num_optimizers = checkpoint["num_optimizers"]
        for i in range(num_optimizers):
            optimizers[i].load_state_dict(checkpoint["optimizer_state_dicts"][i])

    # Move everything to the accelerator together
    all_device_objects = accelerator.prepare(vae, dataloader, *optimizers)
    vae = all_device_objects[0]
    dataloader = all_device_objects[1]
    optimizers = all_device_objects[2 : 2 + len(optimizers)]
    dataloader = cycle(dataloader)

    step = 0
    max_grad_norm = 1.0

    with tqdm(initial=step, total=num_training_steps) as progress_bar:
        while step < num_training_steps:
            videos, classes = next(dataloader)

            with accelerator.accumulate(vae):
                for optimizer_idx, optimizer in enumerate(optimizers):
                    with accelerator.autocast():
                        loss, reconstructions, posterior, log_dict_idx = vae(
                            batch=videos,
                            batch_idx=-1,
                            optimizer_idx=optimizer_idx,
                            global_step=step,
                        )
                        if optimizer_idx == 0:
                            optimizer_losses = loss
                        else:
                            optimizer_losses += loss

                accelerator.backward(optimizer_losses)
                accelerator.clip_grad_norm_(vae.parameters(), max_grad_norm)

                for optimizer_idx, optimizer in enumerate(optimizers):
                    optimizer.step()
                    optimizer.zero_grad()

            accelerator.wait_for_everyone()

            if step % save_and_sample_every_n == 0:
                # Save a corresponding model checkpoint.
                if accelerator.is_main_process:
                    torch.save(
                        {
                            "step": step,
                            "model_state_dict": accelerator.unwrap_model(  # not: TB407
                                vae
                            ).state_dict(),
                            "num_optimizers": len(optimizers),
                            "optimizer_state_dicts": [
                                optimizer.state_dict() for optimizer in optimizers
                            ],
                            "loss": loss,
                        },
                        f"{OUTPUT_NAME}/vae-{step}.pt",
                    )

            step += 1
            progress_bar.update(1)

    # Save a corresponding model checkpoint.
    if accelerator.is_main_process:
        torch.save(
            {
                "step": step,
                "model_state_dict": accelerator.unwrap_model(vae).state_dict(),  # not: TB407
                "num_optimizers": len(optimizers),
                "optimizer_state_dicts": [
                    optimizer.state_dict() for optimizer in optimizers
                ],
                "loss": loss,
            },
            f"{OUTPUT_NAME}/vae-{step}.pt",
        )
    accelerator.end_training()
