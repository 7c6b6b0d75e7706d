"""The glossary page: the training words the launch form uses (GRPO, KL, LoRA, dapo...), in plain words.

The launch form links its settings to these entries by anchor (anneal.training.launch_layout), and a test
checks that every anchor it links to is here.
"""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

# (anchor, term, explanation). Written for a domain expert who knows their data, not machine learning.
TERMS: tuple[tuple[str, str, str], ...] = (
    (
        "reinforcement-learning",
        "Reinforcement learning (RL)",
        "Training by trial and reward: the model writes answers to your prompts, your verifiers score them, "
        "and the model is nudged toward the answers that scored well. No worked solutions are needed, only a "
        "way to check an answer.",
    ),
    (
        "verifier",
        "Verifier and reward",
        "A verifier is the check you build in the form builder (exact answer, numeric, tests...). Its score "
        "for a completion, 0 to 1, is the reward. With several verifiers the reward is their weighted sum.",
    ),
    (
        "completion",
        "Prompt, completion and token",
        "The prompt is a row's question; the completion is what the model writes after it. Models read and "
        "write tokens: pieces of words (the tiny model uses one token per character). Lengths are counted "
        "in the chosen model's tokens.",
    ),
    (
        "grpo",
        "GRPO and RLOO (the algorithm)",
        "Two ways of turning rewards into learning. For each prompt the model writes a group of completions; "
        "each one is compared with the others of its group, so the model learns what made the better ones "
        "better. GRPO compares with the group's average and spread; RLOO compares each completion with the "
        "average of the others. GRPO is a good default.",
    ),
    (
        "generations",
        "Completions per prompt (the group)",
        "How many answers the model writes for each prompt in a step. More gives a fairer comparison inside "
        "the group but costs proportionally more time. A group whose answers all score the same teaches "
        "nothing.",
    ),
    (
        "loss-type",
        "Loss type (grpo, dr_grpo, dapo, ...)",
        "Variants of the GRPO formula that differ in how long and short completions are weighed. dapo, the "
        "default, weighs every token alike, so long answers are not favoured or punished for their length. "
        "Leave it unless you are reproducing a paper.",
    ),
    (
        "kl",
        "KL penalty (beta)",
        "A brake that keeps the trained model close to the model it started from: above 0 it is penalised "
        "for drifting away, which protects what the model already knew but slows learning and needs memory "
        "for a second copy of the model. 0 (the default) turns it off.",
    ),
    (
        "learning-rate",
        "Learning rate, warm-up and schedule",
        "How big each update of the model is. Too high and training becomes unstable; too low and nothing "
        "changes. The warm-up raises it gradually over the first steps; the schedule may lower it toward "
        "the end.",
    ),
    (
        "step",
        "Step",
        "One round of training: take some prompts, write completions, score them, update the model. A job's "
        "length is its number of steps.",
    ),
    (
        "temperature",
        "Temperature",
        "How adventurous the model's writing is while training: higher gives more varied completions (more "
        "to learn from), lower gives safer, more similar ones.",
    ),
    (
        "lora",
        "LoRA (light fine-tuning)",
        "Instead of changing every weight of the model, train a small add-on (an adapter) beside the frozen "
        "original. Much less memory and faster for big models, usually a little less gain. The rank is the "
        "size of the add-on; 0 trains the whole model.",
    ),
    (
        "max-completion-length",
        "Max completion length",
        "The most tokens the model may write per answer. Answers are cut there, so it must be at least as "
        "long as your longest reference answer (the form warns when it is not); longer costs more time.",
    ),
    (
        "prompt-length",
        "Long prompts: max prompt length, overflow policy, length curriculum",
        "A limit on how long a prompt may be, what happens to rows over it (refuse the launch, leave them "
        "out, or cut them), and an option to train on short prompts first and longer ones later.",
    ),
    (
        "domain",
        "Domain and domain weights",
        "A label on rows of one kind (arithmetic, code, law...). Each domain needs a verifier; the weights "
        "say what share of each step's prompts each domain gets.",
    ),
    (
        "adaptive-sampling",
        "Adaptive sampling and difficulty profiling",
        "Spend the training where it teaches: adaptive sampling gives more prompts to domains the model "
        "sometimes but not always gets right; profiling tries every prompt a few times first and drops those "
        "the model always or never solves.",
    ),
    (
        "held-out",
        "Held-out evaluation and the forgetting alarm",
        "Rows the model never trains on, scored before, during and after training to tell real learning from "
        "memorising. The forgetting alarm fires when a domain's held-out score falls after training starts.",
    ),
    (
        "checkpoint",
        "Checkpoint",
        "A saved copy of the model during or after training. A checkpoint is what you deploy, and a paused or "
        "interrupted job resumes from its latest one.",
    ),
    (
        "vllm",
        "vLLM",
        "A fast engine for writing completions on a GPU. It speeds up the writing part of each step; it is "
        "not used on a CPU.",
    ),
    (
        "generate-ahead",
        "Generate ahead (off-policy by one step)",
        "Checking answers (running tests in sandboxes) can take as long as the rest of a step. With generate "
        "ahead on, the model writes the next step's answers while this step's are still being checked, so "
        "no step waits for the checks; in exchange each update learns from answers written one update "
        "earlier, which the training formula corrects for. It helps most when the checks run on other "
        "machines than the training; on a small machine where both share the same cores it can be slower.",
    ),
    (
        "budget",
        "Budget and cost estimate",
        "The most a job may spend, in USD, on devices and sandboxes; reaching it saves a checkpoint and "
        "pauses the job. The estimate is timed from your team's last finished job on the same model, or from "
        "a default rate before there is one.",
    ),
    (
        "agent",
        "Agent jobs (environment)",
        "Instead of one answer per prompt, the model works in several turns: it runs commands and edits "
        "files in a sandbox, and is rewarded by the tests of the finished work.",
    ),
)
ANCHORS = frozenset(anchor for anchor, _, _ in TERMS)


@require_GET
@login_required
def glossary(request):
    return render(request, "help/glossary.html", {"section": "glossary", "terms": TERMS})
