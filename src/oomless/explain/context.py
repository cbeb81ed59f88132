"""What a component's formula needs: the run, the phase, the model whose work the phase runs.

A plan keeps bytes per named component; the explanation rebuilds, from the same plan, the
planner objects that made them (`GroupPlanner` of each placement group, the vLLM budget) and
asks them the same questions, so the inputs shown are the planner's own values. Which model a
phase ran (the largest of the log-prob forwards, of the optimizer steps) is found by building
each candidate with the planner and matching it to the planned phase.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from ..memory.components import Category, Component
from ..memory.vllm import EngineBudget
from ..planner.engine import engine_budget
from ..planner.gpu_phases import PREFIX, GroupPlanner, _finish
from ..planner.plan import Plan, PhaseMemory
from ..planner.roles import Group, RoleModel, placement_groups
from ..planner.shape import RunShape
from ..spec.run import Role, RolloutEngine, RunSpec

ROLE_OF_PREFIX = {prefix: role for role, prefix in PREFIX.items()}
HOST_ROLE = {role.value: role for role in PREFIX}


@dataclass(frozen=True)
class Ctx:
    plan: Plan
    phase: str
    components: tuple[Component, ...]
    budget: EngineBudget
    groups: tuple[Group, ...]
    planner: GroupPlanner | None = None
    """None on the host."""
    role: Role | None = None
    """The model whose forward, backward or optimizer step the phase runs (None: no such work)."""

    @property
    def spec(self) -> RunSpec:
        return self.plan.spec

    @property
    def shape(self) -> RunShape:
        return self.plan.shape

    def model(self, role: Role) -> RoleModel:
        return self.plan.models[role]

    def state_args(self) -> tuple[tuple[Role, ...], tuple[Role, ...]]:
        """(active, grads_of) the planner passed to `GroupPlanner.states` in this phase."""
        if self.phase in ("train", "optimizer") and self.planner is not None and self.planner.trains_jointly():
            return (Role.actor, Role.critic), (Role.actor, Role.critic)
        if self.phase in ("train", "critic_train", "optimizer") and self.role is not None:
            return (self.role,), (self.role,)
        if self.role is not None:
            return (self.role,), ()
        return (), ()

    def states_of(self, role: Role) -> list[Component]:
        """The state components of one model in this phase, as the planner lists them."""
        assert self.planner is not None
        one = copy.copy(self.planner)
        one.models = {role: self.planner.models[role]}
        active, grads_of = self.state_args()
        return one.states(self.phase, active=active, grads_of=grads_of)


def _phase_role(planner: GroupPlanner, phase: PhaseMemory) -> Role | None:
    spec, models = planner.spec, planner.models
    if phase.name == "train":
        return Role.actor
    if phase.name == "critic_train":
        return Role.critic
    if phase.name in ("weight_sync",) or (phase.name == "rollout" and spec.rollout.engine == RolloutEngine.hf):
        return Role.actor if Role.actor in models else None
    if phase.name == "logprob":
        for r in planner.forward_roles():
            comps = (planner.overheads() + planner.states("logprob", active=(r,)) + planner.engine_residue()
                     + planner.forward_work(r) + planner.kept_scores())
            if _finish(comps) == phase.components:
                return r
        raise AssertionError("no log-prob forward of the planner matches the planned phase")
    if phase.name == "optimizer":
        if planner.trains_jointly():
            return Role.actor  # policy and value model stepped together (`GroupPlanner.optimizer_roles`)
        for r, m in models.items():
            if not m.trainable:
                continue
            comps = planner.overheads() + planner.states("optimizer", active=(r,), grads_of=(r,)) + planner.engine_residue()
            comps.append(Component("optimizer.fp32_grads", Category.GRAD, m.fp32_grads))
            comps.append(Component("optimizer.step_temporaries", Category.TEMP, m.step_temporaries))
            if _finish(comps + planner.kept_scores()) == phase.components:
                return r
        raise AssertionError("no optimizer step of the planner matches the planned phase")
    return None


def gpu_contexts(plan: Plan) -> list[tuple[str, str, Ctx]]:
    """(device group, phase, context) for every phase of every placement group."""
    spec = plan.spec
    groups = placement_groups(spec)
    budget = engine_budget(spec, plan.arch, plan.shape)
    out = []
    for group, device in zip(groups, plan.devices):
        planner = GroupPlanner(spec, plan.shape, group, plan.models, budget)
        for phase in device.phases:
            ctx = Ctx(plan, phase.name, phase.components, budget, groups, planner, _phase_role(planner, phase))
            out.append((device.role, phase.name, ctx))
    return out


def host_contexts(plan: Plan) -> list[tuple[str, Ctx]]:
    groups = placement_groups(plan.spec)
    budget = engine_budget(plan.spec, plan.arch, plan.shape)
    return [(p.name, Ctx(plan, p.name, p.components, budget, groups)) for p in plan.host.phases]
