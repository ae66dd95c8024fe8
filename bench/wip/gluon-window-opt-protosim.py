"""(bench/wip/gluon-window-opt.md, section 8; a session-33 helper) Randomised interleaving check of the PERSISTENT EARLY_Q barrier protocol, with and without SPLIT_Q:
one loader, two consumers, mbarriers with parity waits, TMA completions at random later times.
Checks: no deadlock; every read sees the tile / Q block it expects (not stale, not overwritten);
no TMA issued into a slot whose previous content a consumer has not finished reading."""
import random
import sys

NUM_STAGES = 3


class Bar:
    def __init__(self, count):
        self.count, self.arr, self.tx, self.done = count, 0, 0, 0

    def arrive(self, tx=0):
        self.arr += 1
        self.tx += tx
        self._check()

    def tx_done(self, tx):
        self.tx -= tx
        self._check()

    def _check(self):
        if self.arr == self.count and self.tx == 0:
            self.done += 1
            self.arr = 0

    def passes(self, parity):
        return (self.done & 1) != parity


def run(seed, split, blocks):
    rnd = random.Random(seed)
    q_bar = [Bar(1), Bar(1)] if split else [Bar(1)]
    q_free = [Bar(1), Bar(1)] if split else [Bar(2)]
    k_ready = [Bar(1) for _ in range(NUM_STAGES)]
    v_ready = [Bar(1) for _ in range(NUM_STAGES)]
    kv_empty = [Bar(2) for _ in range(NUM_STAGES)]
    # slot contents (None: empty) and who finished reading the current content
    q_slot = [None, None]
    k_slot = [None] * NUM_STAGES
    v_slot = [None] * NUM_STAGES
    k_read = [set() for _ in range(NUM_STAGES)]
    v_read = [set() for _ in range(NUM_STAGES)]
    q_read = [set(), set()]
    pending = []          # TMA in flight: (slot kind, index, tag, bar, bytes)

    def qb(w):
        return q_bar[w] if split else q_bar[0]

    def qf(w):
        return q_free[w] if split else q_free[0]

    def issue(kind, idx, tag, bar, nbytes):
        slots, reads = {"k": (k_slot, k_read), "v": (v_slot, v_read), "q": (q_slot, q_read)}[kind]
        if slots[idx] is not None:
            need = {0, 1} if kind != "q" else {idx}
            assert need <= reads[idx], f"{kind}[{idx}] overwritten ({slots[idx]} -> {tag}) before read by {need - reads[idx]}"
        pending.append((kind, idx, tag, bar, nbytes))

    def loader():
        t0 = 0
        for it, n in enumerate(blocks):
            def load_kv(g):
                s, ph = g % NUM_STAGES, (g // NUM_STAGES) & 1
                while not kv_empty[s].passes(ph ^ 1):
                    yield
                k_ready[s].arrive(tx=1)
                issue("k", s, g, k_ready[s], 1)
                v_ready[s].arrive(tx=1)
                issue("v", s, g, v_ready[s], 1)
            for j in range(min(n, 1)):
                yield from load_kv(t0 + j)
            if split:
                for w in range(2):
                    while not q_free[w].passes((it & 1) ^ 1):
                        yield
                    q_bar[w].arrive(tx=1)
                    issue("q", w, it, q_bar[w], 1)
            else:
                while not q_free[0].passes((it & 1) ^ 1):
                    yield
                q_bar[0].arrive(tx=2)
                issue("q", 0, it, q_bar[0], 1)
                issue("q", 1, it, q_bar[0], 1)
            for j in range(min(n, 1), n):
                yield from load_kv(t0 + j)
            t0 += n

    def consumer(w):
        t0 = 0
        for it, n in enumerate(blocks):
            last = t0 + n - 1
            while not qb(w).passes(it & 1):
                yield
            s0 = t0 % NUM_STAGES
            while not k_ready[s0].passes((t0 // NUM_STAGES) & 1):
                yield
            assert q_slot[w] == it, (w, "Q", q_slot[w], it)
            assert k_slot[s0] == t0, (w, "K", k_slot[s0], t0)
            yield                                            # S in flight
            k_read[s0].add(w)
            if n == 1:
                q_read[w].add(w)
                qf(w).arrive()
            for g in range(t0 + 1, t0 + n):
                s, p = g % NUM_STAGES, (g - 1) % NUM_STAGES
                while not k_ready[s].passes((g // NUM_STAGES) & 1):
                    yield
                while not v_ready[p].passes(((g - 1) // NUM_STAGES) & 1):
                    yield
                assert q_slot[w] == it and k_slot[s] == g and v_slot[p] == g - 1, (w, g, q_slot, k_slot, v_slot)
                yield                                        # S retires
                k_read[s].add(w)
                if g == last:
                    q_read[w].add(w)
                    qf(w).arrive()
                yield                                        # softmax, then P V retires
                assert v_slot[p] == g - 1
                v_read[p].add(w)
                kv_empty[p].arrive()
            sl = last % NUM_STAGES
            while not v_ready[sl].passes((last // NUM_STAGES) & 1):
                yield
            assert v_slot[sl] == last
            yield
            v_read[sl].add(w)
            kv_empty[sl].arrive()
            yield                                            # epilogue
            t0 += n

    procs = {"L": loader(), "C0": consumer(0), "C1": consumer(1)}
    steps = 0
    while procs or pending:
        steps += 1
        if steps > 200000:
            raise AssertionError("no progress (livelock?)")
        choices = list(procs) + (["tma"] if pending else [])
        pick = rnd.choice(choices)
        if pick == "tma":
            kind, idx, tag, bar, nbytes = pending.pop(rnd.randrange(len(pending)))
            slots, reads = {"k": (k_slot, k_read), "v": (v_slot, v_read), "q": (q_slot, q_read)}[kind]
            slots[idx] = tag
            reads[idx] = set()
            bar.tx_done(nbytes)
            continue
        # run the picked process until it yields; detect a global deadlock by spinning counts
        try:
            next(procs[pick])
        except StopIteration:
            del procs[pick]
    return steps


def deadlock_safe_run(seed, split, blocks):
    # a deadlock shows as "no progress": every process spins on a wait and no TMA is pending
    return run(seed, split, blocks)


if __name__ == "__main__":
    n_runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rnd = random.Random(1)
    for split in (False, True):
        for i in range(n_runs):
            blocks = [rnd.choice([1, 1, 2, 3, 5, 9, 9, 9]) for _ in range(rnd.randint(1, 12))]
            run(i, split, blocks)
        print("split" if split else "single", "ok", n_runs, "runs")
