"""Loaded by the oracle venv's interpreter when this directory is on PYTHONPATH.

It lets the real `sglang.benchmark.serving` (and its `sglang.bench_serving` alias) of sglang
0.5.23 run offline against the stand-in server. The oracle venv has sglang without its model
tooling, so three imports are provided here, and nothing else of bench_serving is changed:

- `transformers`: only a tokenizer is needed. This one is word level ("w17" <-> 17), which is
  exactly how the stand-in server writes its output tokens, so bench_serving's re-tokenized
  counts are real counts. A real tokenizer would have to be downloaded from a hub.
- `datasets`: imported at module level for the MMMU dataset only (not used here).
- `sglang.srt.disaggregation.utils`: imported for one constant; the real module pulls in every
  model config class of sglang, which needs the real transformers.

`import sglang` happens first, with no transformers importable, so sglang's transformers
patches stay off exactly as on a machine without transformers.
"""

import sys
import types
import typing

import sglang  # noqa: F401


class PreTrainedTokenizerBase:
    pass


class WordTokenizer(PreTrainedTokenizerBase):
    # A real tokenizer's size: random-ids draws each prompt as consecutive ids from a random start,
    # so two prompts coincide about once per vocab_size pairs (with 1000 words, one in a dozen
    # prompts of a small run did, and the prefix cache served it).
    vocab_size = 151_552
    init_kwargs: typing.ClassVar = {"chat_template": "standin"}
    all_special_ids: typing.ClassVar = []

    def num_special_tokens_to_add(self, pair=False):
        return 0

    def get_vocab(self):
        return {f"w{i}": i for i in range(self.vocab_size)}

    def encode(self, text, add_special_tokens=True):
        return [int(w[1:]) % self.vocab_size if w[1:].isdigit() else len(w) for w in text.split()]

    def decode(self, ids, **kwargs):
        return " ".join(f"w{int(i)}" for i in ids)

    def __call__(self, text, **kwargs):
        return {"input_ids": self.encode(text)}

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kwargs):
        text = " ".join(m["content"] if isinstance(m["content"], str) else "" for m in messages)
        return self.encode(text) if tokenize else text


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        return WordTokenizer()


transformers = types.ModuleType("transformers")
transformers.PreTrainedTokenizerBase = PreTrainedTokenizerBase
transformers.PreTrainedTokenizer = WordTokenizer
transformers.PreTrainedTokenizerFast = WordTokenizer
transformers.AutoTokenizer = AutoTokenizer
transformers.AutoProcessor = AutoTokenizer
sys.modules["transformers"] = transformers

datasets = types.ModuleType("datasets")


def load_dataset(*args, **kwargs):
    raise RuntimeError("no hub access in the oracle")


datasets.load_dataset = load_dataset
sys.modules["datasets"] = datasets

disagg = types.ModuleType("sglang.srt.disaggregation.utils")
disagg.FAKE_BOOTSTRAP_HOST = "2.2.2.2"  # the value in sglang 0.5.23
sys.modules["sglang.srt.disaggregation.utils"] = disagg
