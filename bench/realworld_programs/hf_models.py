"""HuggingFace BERT or GPT-2, built from its default config (no download), a few AdamW steps.

    python bench/realworld_programs/hf_models.py {bert,gpt2} [--steps 2] [--batch 2] [--seq 64]

The model code is HuggingFace's; this only builds the model and feeds it random token ids.
"""

from __future__ import annotations

import argparse

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=["bert", "gpt2"])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.model == "bert":
        from transformers import BertConfig, BertForMaskedLM

        config = BertConfig()
        model = BertForMaskedLM(config)
    else:
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config()
        model = GPT2LMHeadModel(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    for step in range(args.steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"{args.model}: step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
