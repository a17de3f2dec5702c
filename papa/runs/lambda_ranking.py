"""A grid's λ head ranking (paper 3.2): learned once, saved, and read again by every grid that selects heads by it.

A saved ranking is checked against the model, length, layout and the profile's settings before it is used.
"""
from __future__ import annotations

from pathlib import Path

from papa.core import distributed
from papa.core.errors import InputError
from papa.core.phases import phase, timed_into
from papa.core.progress import tqdm
from papa.core.vocabulary import DEFAULT_STEP_MODE, PAPER_PROBE_INPUTS, RANKED
from papa.method.rankings import HeadRanking, load_ranking
from papa.method.selection import parse_selection
from papa.probing.checkpoint import TrainingCheckpoint
from papa.probing.convergence import lambda_movement
from papa.probing.features import EncodedTask
from papa.probing.ranking import LambdaTrace, learn_lambdas
from papa.probing.training import TrainSettings
from papa.runs.lambda_curves import CURVE_EVERY, checkpoint_path, curve_path, save_curve
from papa.runs.names import RankingName
from papa.runs.profiles import get_profile
from papa.runs.session import GridConfig, Session, open_session, recorded_corpus, session_constants, subset
from papa.tasks.data import disjoint_part, half_part, load_examples, subset_indices


RANKING_SEED = 0  # the λ ranking is a pre-processing step (paper 3.2): one ranking serves every probe seed


def head_ranking(s: Session, kind: str, progress: bool, seed: int = RANKING_SEED, *, part: int = 0,
                 profile: str | None = None) -> HeadRanking:
    """The λ ranking for `kind`'s constants, λ learned with `seed` on training part `part` (0: the grid's subset;
    k ≥ 1: the k-th disjoint one): loaded if saved with the profile's settings, else learned and saved. Another
    `profile`'s ranking is read, never learned here."""
    if profile is not None and profile != s.cfg.profile:
        return _other_profile_ranking(s, kind, seed, profile, part)
    cfg, sig = s.cfg, s.controller.signature
    path = _ranking_path(s, kind, seed, part)
    prof = s.profile
    rank_data = subset(s.train, prof.rank_limit, prof.sample)
    if part:
        rank_data = _disjoint_rank_data(s, len(rank_data), part)
    settings = TrainSettings.from_task(s.spec, epochs=prof.rank_epochs, step_mode=cfg.steps)
    lambda_lr = prof.rank_lr or settings.learning_rate
    wanted = {"examples": len(rank_data), "epochs": settings.epochs, "learning_rate": settings.learning_rate,
              "lambda_learning_rate": lambda_lr, "probe_inputs": cfg.probe_inputs}
    if distributed.main_decides(path.is_file() and not cfg.force):
        ranking = _checked_ranking(s, path)
        recorded = dict(ranking.metadata)
        stale = {k: recorded[k] for k, v in wanted.items() if k in recorded and recorded[k] != v}
        if not stale:
            return ranking
        # the file is named by profile, not by its sizes: a profile whose sizes changed must not reuse it
        tqdm.write(f"{path.name} was learned with {_settings_text(stale)}; learning it again with the profile's "
                   f"{_settings_text(wanted)}.")
    s.controller.set_constants(session_constants(s, kind.removeprefix("trainable_"), progress))
    trace = LambdaTrace(every=CURVE_EVERY)
    checkpoint = None
    if distributed.world_size() == 1:  # one process owns the file; distributed λ learning starts over
        identity = {"ranking": path.name, "task": cfg.task, "seed": seed, **wanted}
        if cfg.steps != DEFAULT_STEP_MODE:  # a run resumes in the arithmetic it started in
            identity["steps"] = cfg.steps
        checkpoint = TrainingCheckpoint(checkpoint_path(path), identity)
        if cfg.force:
            checkpoint.remove()
        elif checkpoint.path.is_file() and progress:
            tqdm.write(f"λ learning resumes from {checkpoint.path}")
    with phase("lambda"):
        lambdas = learn_lambdas(s.controller, s.spec, rank_data, settings, seed=seed, lambda_lr=prof.rank_lr,
                                progress=progress, trace=trace, standardize=cfg.probe_inputs != PAPER_PROBE_INPUTS,
                                checkpoint=checkpoint)
    # the step mode is recorded unless eager (a saved ranking serves any mode)
    ranking = HeadRanking.from_lambdas(
        lambdas, signature=sig, task=cfg.task, constants=kind, constants_corpus=cfg.constants_corpus, seed=seed,
        max_length=s.max_length, layout=cfg.layout, examples=len(rank_data), epochs=settings.epochs,
        learning_rate=settings.learning_rate, lambda_learning_rate=lambda_lr, steps=trace.total_steps,
        lambda_movement=lambda_movement(lambdas), profile=cfg.profile, dtype=cfg.dtype,
        probe_inputs=cfg.probe_inputs, **({} if cfg.steps == DEFAULT_STEP_MODE else {"step_mode": cfg.steps}))
    if distributed.is_main():
        ranking.save(path)
        save_curve(curve_path(path), trace, path.name)
        if checkpoint is not None:
            checkpoint.remove()  # after the ranking is saved: a kill in between resumes at the last step
    return ranking


def _ranking_path(s: Session, kind: str, seed: int = RANKING_SEED, part: int = 0,
                  profile: str | None = None) -> Path:
    """Where the session's λ ranking with `kind` constants lies, λ learned with `seed` on training part `part` by
    `profile` (None: the grid's)."""
    cfg = s.cfg
    # a ranking learned with a given constants file over another corpus is that corpus's, not the grid's
    name = RankingName(s.controller.signature.model_name, cfg.task, kind, recorded_corpus(s, cfg.constants_corpus),
                       s.max_length, profile or cfg.profile, cfg.layout, cfg.dtype, cfg.probe_inputs, seed, part)
    return s.out.rankings / name.filename


def _other_profile_ranking(s: Session, kind: str, seed: int, profile: str, part: int = 0) -> HeadRanking:
    """The ranking `profile` learned for the session's model, task and settings (with `seed` on training part
    `part`): read, checked, never learned."""
    get_profile(profile)  # an unknown profile says so, naming the known ones
    path = _ranking_path(s, kind, seed, part, profile=profile)
    if not path.is_file():
        draw = "".join(f" --{name} {value}" for name, value in (("seed", seed), ("part", part)) if value)
        command = f"papa rank --task {s.cfg.task} --profile {profile}{draw} --out {s.out}"
        raise InputError(f"the selection reads the λ ranking the {profile!r} profile learns, and there is none at "
                         f"{path}: learn it first (`{command}`), with this grid's model and layout.")
    return _checked_ranking(s, path)


def _checked_ranking(s: Session, path: Path) -> HeadRanking:
    """The ranking saved at `path`, read and checked against the session's model, length and layout."""
    sig = s.controller.signature
    ranking = load_ranking(path)
    ranking.check_compatible(sig.num_layers, sig.num_heads, sig.model_name, signature=sig, max_length=s.max_length,
                             layout=s.cfg.layout)
    return ranking


def check_saved_rankings(s: Session) -> None:
    """Check every saved λ ranking the grid will read (and that other profiles' exist) before its first run."""
    for kind in s.cfg.constants:
        for method in s.cfg.selections:
            selection = parse_selection(method)
            if selection.method not in RANKED:
                continue
            if selection.profile not in (None, s.cfg.profile):
                _other_profile_ranking(s, kind, selection.seed, selection.profile, selection.part)
                continue
            path = _ranking_path(s, kind, selection.seed, selection.part)
            if path.is_file() and not s.cfg.force:
                _checked_ranking(s, path)


def _disjoint_rank_data(s: Session, size: int, part: int) -> EncodedTask:
    """`size` training examples of disjoint part `part`, outside the grid's subset and other parts; half of the
    split where the grid and λ both use all of it, else outside λ's own examples."""
    every = load_examples(s.spec, "train", s.data_dir)
    taken = subset_indices(len(every), s.profile.train_limit, s.profile.sample)
    if len(taken) == len(every) and size == len(every):
        return s.encode([every[i] for i in half_part(len(every), part)])
    if len(taken) == len(every):
        # nothing lies outside the grid's subset: drawn outside the examples part 0's λ learned on
        taken = [taken[i] for i in subset_indices(len(taken), s.profile.rank_limit, s.profile.sample)]
    return s.encode([every[i] for i in disjoint_part(len(every), taken, size, part)])


def _settings_text(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def learn_ranking(cfg: GridConfig, kind: str = "average", *, seed: int = RANKING_SEED, part: int = 0,
                  progress: bool = True) -> tuple[HeadRanking, Path]:
    """Learn (or load) the λ ranking of `cfg`'s task with `kind` constants, `seed` and training `part`; returns it
    and where it is saved."""
    for name, value, meaning in (("seed", seed, f"{RANKING_SEED} for the grid's own ranking, another one (1, 2, "
                                                "...) to compare with it"),
                                 ("part", part, "0 for the grid's own training subset, 1, 2, ... for disjoint ones")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:  # before the model and data load
            raise InputError(f"the ranking's {name} must be a whole number (got {value!r}): {meaning}.")
    progress = progress and distributed.is_main()
    s = open_session(cfg, progress)
    try:
        with timed_into(s.out, ran=lambda: False):
            ranking = head_ranking(s, kind, progress, seed, part=part)
    finally:
        s.controller.detach()
    return ranking, _ranking_path(s, kind, seed, part)
