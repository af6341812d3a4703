"""Decoding CTF fields through bt2's C layer, one plan per event class, and event naming.

bt2's object API costs ~17 µs per event; decoding through `bt2._native_bt` with a plan of
member indexes and per-field decoders built once per event class is an order of magnitude
faster. Tied to bt2 2.0.x internals on purpose (Debian python3-bt2 2.0.4); tests pin it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX

#: Event-context fields used as-is when present (``lttng add-context -t tid -t pid ...``).
CONTEXT_IDENTITY = ("tid", "pid", "procname")
#: Payload member that carries a syscall's return value.
RET_FIELD = "ret"

def _field_decoder(nbt, field_class) -> Callable[[Any], Any]:
    """A function field-pointer → JSON-able value, specialised on the field class once."""
    ftype = nbt.field_class_get_type(field_class)
    is_type = nbt.field_class_type_is
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_UNSIGNED_INTEGER):  # also unsigned enums
        return nbt.field_integer_unsigned_get_value
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_SIGNED_INTEGER):  # also signed enums
        return nbt.field_integer_signed_get_value
    if ftype == nbt.FIELD_CLASS_TYPE_STRING:
        # babeltrace2 2.0.4 leaves a recycled string field's old bytes in place when the new
        # string is empty (length 0): get_value then returns a stale string from an earlier
        # event (the babeltrace2 CLI prints it too). The length is right, so check it first.
        get_value, get_length = nbt.field_string_get_value, nbt.field_string_get_length
        return lambda f: get_value(f) if get_length(f) else ""
    if ftype == nbt.FIELD_CLASS_TYPE_BOOL:
        return lambda f: bool(nbt.field_bool_get_value(f))
    if ftype == nbt.FIELD_CLASS_TYPE_BIT_ARRAY:
        return nbt.field_bit_array_get_value_as_integer
    if ftype == nbt.FIELD_CLASS_TYPE_SINGLE_PRECISION_REAL:
        return nbt.field_real_single_precision_get_value
    if ftype == nbt.FIELD_CLASS_TYPE_DOUBLE_PRECISION_REAL:
        return nbt.field_real_double_precision_get_value
    if ftype == nbt.FIELD_CLASS_TYPE_STRUCTURE:
        members = _struct_plan(nbt, field_class)
        borrow = nbt.field_structure_borrow_member_field_by_index_const
        return lambda f: {name: dec(borrow(f, i)) for name, i, dec in members}
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_ARRAY):
        element_class = nbt.field_class_array_borrow_element_field_class_const(field_class)
        element = _field_decoder(nbt, element_class)
        length = nbt.field_array_get_length
        borrow = nbt.field_array_borrow_element_field_by_index_const
        return lambda f: [element(borrow(f, i)) for i in range(length(f))]
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_OPTION):
        inner = _field_decoder(nbt, nbt.field_class_option_borrow_field_class_const(field_class))

        def option(f):
            content = nbt.field_option_borrow_field_const(f)
            return None if content is None else inner(content)

        return option
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_VARIANT):
        count = nbt.field_class_variant_get_option_count(field_class)
        options = [
            _field_decoder(
                nbt,
                nbt.field_class_variant_option_borrow_field_class_const(
                    nbt.field_class_variant_borrow_option_by_index_const(field_class, i)
                ),
            )
            for i in range(count)
        ]
        return lambda f: options[nbt.field_variant_get_selected_option_index(f)](
            nbt.field_variant_borrow_selected_option_field_const(f)
        )
    return lambda f: None  # a field kind CTF 1.8 cannot produce


def _struct_plan(nbt, struct_class) -> list[tuple[str, int, Callable]]:
    """(name, member index, decoder) per member; sequence-length members are left out
    (a list's length says the same thing, and CTF writers add them back)."""
    count = nbt.field_class_structure_get_member_count(struct_class)
    lengths: set[int] = set()
    plan = []
    for i in range(count):
        member = nbt.field_class_structure_borrow_member_by_index_const(struct_class, i)
        fc = nbt.field_class_structure_member_borrow_field_class_const(member)
        if nbt.field_class_get_type(fc) == nbt.FIELD_CLASS_TYPE_DYNAMIC_ARRAY_WITH_LENGTH_FIELD:
            length_path = nbt.field_class_array_dynamic_with_length_field_borrow_length_field_path_const
            path = length_path(fc)
            if nbt.field_path_get_item_count(path) >= 1:
                last = nbt.field_path_borrow_item_by_index_const(
                    path, nbt.field_path_get_item_count(path) - 1
                )
                if nbt.field_path_item_get_type(last) == nbt.FIELD_PATH_ITEM_TYPE_INDEX:
                    lengths.add(nbt.field_path_item_index_get_index(last))
        plan.append((nbt.field_class_structure_member_get_name(member), i, _field_decoder(nbt, fc)))
    return [entry for entry in plan if entry[1] not in lengths]


KIND_PLAIN, KIND_SYSCALL_EXIT, KIND_LEGACY_EXIT, KIND_LEGACY_ENTRY, KIND_SWITCH = range(5)


class EventPlan:
    """Everything about one event class that the hot loop would otherwise look up per event:
    canonical name, what the name implies (`kind`), payload and context decoders."""

    __slots__ = ("name", "kind", "exit_name", "payload", "context", "has_identity")

    def __init__(self, nbt, event_ptr, name: str, legacy_names: bool):
        self.kind = KIND_PLAIN
        self.exit_name = None
        if legacy_names and name == "exit_syscall":
            self.kind = KIND_LEGACY_EXIT
        elif legacy_names and (entry := _legacy_entry_name(name)) is not None:
            name = entry
            self.kind = KIND_LEGACY_ENTRY
            self.exit_name = entry.replace(SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX, 1)
        elif name.startswith((SYSCALL_EXIT_PREFIX, "compat_" + SYSCALL_EXIT_PREFIX)):
            self.kind = KIND_SYSCALL_EXIT
        elif name == "sched_switch":
            self.kind = KIND_SWITCH
        self.name = name
        payload = nbt.event_borrow_payload_field_const(event_ptr)
        self.payload = (
            _struct_plan(nbt, nbt.field_borrow_class_const(payload)) if payload is not None else []
        )
        context = []
        for borrow in (
            nbt.event_borrow_common_context_field_const,
            nbt.event_borrow_specific_context_field_const,
        ):
            field = borrow(event_ptr)
            if field is not None:
                context.append((borrow, _struct_plan(nbt, nbt.field_borrow_class_const(field))))
        self.context = context
        members = {member for _, fields in context for member, _, _ in fields}
        self.has_identity = "tid" in members


def _decode_struct(nbt, field, plan) -> dict[str, Any]:
    borrow = nbt.field_structure_borrow_member_field_by_index_const
    return {name: dec(borrow(field, i)) for name, i, dec in plan}


# --- event naming -----------------------------------------------------------------------


def _legacy_syscall_names(tracer: str | None, major: int | None, minor: int | None) -> bool:
    """lttng-modules before 2.6 named syscall entries ``sys_<name>`` / ``compat_sys_<name>``
    and had one ``exit_syscall`` for every exit."""
    if tracer not in (None, "lttng-modules"):
        return False
    return major is None or (major, minor or 0) < (2, 6)


def _legacy_entry_name(name: str) -> str | None:
    if name.startswith("sys_"):
        return SYSCALL_ENTRY_PREFIX + name[4:]
    if name.startswith("compat_sys_"):
        return "compat_" + SYSCALL_ENTRY_PREFIX + name[11:]
    return None
