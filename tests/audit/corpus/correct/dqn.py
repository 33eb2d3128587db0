"""DQN update with a target network in eval mode (correct)."""
import torch
import torch.nn.functional as F


def optimize(policy_net, target_net, memory, optimizer, gamma=0.99, batch_size=128, steps=1000):
    target_net.eval()
    for t in range(steps):
        states, actions, rewards, next_states, dones = memory.sample(batch_size)
        q = policy_net(states).gather(1, actions)
        with torch.no_grad():
            next_q = target_net(next_states).max(1, keepdim=True).values
        target = rewards + gamma * next_q * (1 - dones)
        loss = F.smooth_l1_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        if t % 1000 == 0:
            target_net.load_state_dict(policy_net.state_dict())
