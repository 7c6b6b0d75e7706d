"""A tiny reward model built here for the tests: a one-layer BERT sequence classifier (one label) with a
word-level tokenizer, trained for a few seconds to prefer polite answers to rude ones, saved as a Hugging Face
folder in a model store."""

from pathlib import Path

POLITE = ["thank you for asking", "happy to help", "here is the answer kindly", "please find it below"]
RUDE = ["go away", "figure it out yourself", "stop asking me", "that is a stupid question"]
PROMPTS = ["how do I reset my password", "where is the invoice", "can you help me", "what time is it"]


def build_tiny_reward_model(folder: Path, *, seed: int = 0, steps: int = 80) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    words = sorted({word for text in POLITE + RUDE + PROMPTS for word in text.split()})
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {token: index for index, token in enumerate(specials + words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=1,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    pairs = [(p, a, 1.0) for p in PROMPTS for a in POLITE] + [(p, a, 0.0) for p in PROMPTS for a in RUDE]
    batch = fast([p for p, _, _ in pairs], [a for _, a, _ in pairs], padding=True, return_tensors="pt")
    labels = torch.tensor([[label] for _, _, label in pairs])
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(**batch).logits, labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
