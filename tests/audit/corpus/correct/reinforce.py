import torch


def finish_episode(policy, optimizer, gamma=0.99, eps=1e-8):
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()


def main(policy, env, episodes=100):
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for i_episode in range(episodes):
        state, _ = env.reset()
        for t in range(1, 10000):
            probs = policy(torch.from_numpy(state).float().unsqueeze(0))
            m = torch.distributions.Categorical(probs)
            action = m.sample()
            policy.saved_log_probs.append(m.log_prob(action))
            state, reward, done, _, _ = env.step(action.item())
            policy.rewards.append(reward)
            if done:
                break
        finish_episode(policy, optimizer)
