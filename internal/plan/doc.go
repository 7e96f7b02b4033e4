// Package plan is gpupool's planner: given a Pool (fleet, policy, tenants) it decides, for every
// GPU, a role, a mode and a layout (exclusive; a MIG geometry with legal placements; MPS shares
// with SM percentages and pinned-memory caps; time-slicing; MPS or time-slicing inside a MIG
// instance), and for every tenant its replicas on concrete slices, so that memory fits, every
// SLO holds by the performance model, isolation tiers are respected, and as few GPUs as possible
// are used. It explains every choice, proves how close it is (a lower bound) and compares itself
// with three baselines on the same input.
//
// It is pure: no IO, no clock, no randomness except the explicit *rand.Rand of Synthetic; the
// same input gives a byte-identical plan. Models named by directory are read by the caller and
// passed in Options.Models.
//
// # 1. Candidates
//
// For every tenant and every board of the fleet the planner lists the slice kinds the tenant's
// isolation tier and policy.allowedModes allow:
//
//	exclusive       a whole GPU                                   every tier
//	tensor-parallel tp whole GPUs of one node, tp = 2, 4, 8         every tier
//	mig P           an unshared MIG instance of profile P          every tier
//	mig P + mps 1/k MPS inside an instance, k = 2, 3, 4            soft, shared; DRA path only
//	mps 1/k         MPS on a whole GPU, k = 2 … 8                  soft, shared
//	mig P + ts 1/k  time-slicing inside an instance, k = 2, 4      shared and lowFrequency
//	timeslice 1/k   time-slicing of a whole GPU, k = 2, 3, 4, 6, 8 shared and lowFrequency
//
// MIG+MPS is listed only when the pool sets policy.kubernetesDeviceAPI: dra: NVIDIA's device
// plugin runs no MPS on MIG devices, the node agent runs no per-instance daemons, and the DRA
// driver runs MPS for the instance a claim got. Elsewhere a tenant that could have shared an
// instance by MPS says why it does not (ModeNotAllowed). The candidates are a function of the
// pool, and the lower bound reads the same ones, and every other share a plan may use by rounding
// (fineShareBound: section 4).
//
// MIG profiles are the board's profiles with a known memory size, media variants (+me) folded
// into their base profile. A share 1/k gets floor(100/k) % of the SMs (MPS active-thread
// percentage) and memory/k, rounded down to a MiB, as its pinned-memory cap or time-slice budget.
//
// Each candidate is evaluated for one replica: llm.FitSlice says whether the model, at the
// tenant's quantization, KV-cache dtype and maxContext, fits the slice (its KV cache holding one
// sequence of the context, as vLLM needs to start; concurrency is --max-num-seqs, not a memory
// reservation) and with which vLLM arguments. An end-to-end target E is turned into TTFT ≤ E/4 (when no TTFT target is
// set) and TPOT ≤ (E − TTFT)/(L − 1), L the 99th-percentile output length under the tenant's
// traffic.lengths as internal/sim draws it (the mean O for fixed lengths, about 4.6·O for
// exponential; ADR 0077). For varying lengths with no TTFT target the tenant is evaluated again
// with TTFT ≤ E/8, 3E/8 and E/2 (each with its TPOT target by the same rule) and keeps the split
// whose cheapest feasible candidate is cheapest, E/4 on a tie (evalSplits, ADR 0082); its
// predicted e2eP99 is the 99th percentile of TTFT + mean step × (L − 1) over its length law
// (e2e.go), not TTFT + TPOT × (O − 1) at the mean. Traffic without token counts is sized for 512
// prompt and 256 output tokens (a note says so).
//
// Replicas come from a queueing model of the tenant's replicas (queue.go; docs/planner.md,
// "Queueing-aware sizing"): each replica has as many slots as it runs requests at once —
// concurrency (max-num-seqs), or fewer when its KV cache binds, by perf.Engine.Running — requests
// beyond them wait and the wait counts in TTFT (with a margin on the slot wait), the n replicas' slots are fed by a least-loaded router
// (Erlang C over all slots, then the wait at the chosen replica), step times come from
// perf.Engine.StepTime with every sharer in a step (Load{Active: k−1, Duty: 1}, and the rest of
// the board busy for a MIG instance), TPOT p99 is the step at the p99 decode batch and the p99
// of the prompts a request's decode meets, and the KV
// cache must hold the tokens the requests holding a slot keep in it 99.9 % of the time (kvhold.go:
// a Poisson count of requests, each at its prompt plus a uniform part of its output). The fewest
// replicas n that meet both targets — with a TTFT margin of 5 %, and the slot wait counted 1.6×
// above 75 % busy slots, where one run's p99 spreads between runs — are found by search; a tenant is infeasible by its SLO only when one request
// alone misses it (the reason names "TTFT at a trickle" or "TPOT at batch 1"). The model was
// calibrated against internal/sim (simcal_test.go, simrandom_test.go).
//
// Then: the pool's fixed replicas (planned even below the SLO's need; the tenant is then
// infeasible with an SLOUnmet reason naming the count and the need, and its slice kind is one
// where the fixed count meets the SLO when any does, else the cheapest where some count would:
// fixedSlices rejects the others and keeps them as the tenant's fallback, which the rescue
// places when the kept kinds find no room; once packed, a fixed count steps down to a cheaper
// kind when that serves more tenants in full, or up onto idle GPUs to the kind where a replica
// carries the most when no kind meets the SLO and no tenant is short: fixed.go, ADR 0057), plus one with redundancy, at least minReplicas and the reservation; a candidate is
// rejected — and kept, with its reason, as a rejected alternative — when the model does not fit
// (NoFit), no count meets the SLO (SLOUnmet), or it needs more replicas than maxReplicas or the
// cap (OverCap, naming the bound). Its cost is replicas / k × unit, where the unit is 1 for a
// whole GPU and max(memory slices / board's, compute slices / board's) for a MIG instance.
// Evaluations are cached by model, options, request shape, SLO and slice, and the sizing by
// those and the rate; the memory fits and perf's engines, which the request shape does not
// change, by model, options and slice alone (an evaluation points at its cached memory fit
// rather than holding a copy). Each candidate also keeps the replicas any plan needs on its slice kind,
// which the lower bound uses instead of the planner's counts: the replicas that merely keep up
// with the load (no SLO), or, for Poisson traffic on a replica that cannot preempt, the TTFT
// floor when higher — the fewest replicas whose max-num-seqs places can start 99 % of the
// requests in time in any schedule (Erlang B of the interval each such request must hold a
// place, lbfloor.go; docs/planner.md, "The lower bound").
//
// Tensor-parallel groups (docs/planner.md, "Tensor parallelism") are offered at the degrees the
// model's heads and the board's link allow and one node of the fleet holds, sized by perf's
// tensor-parallel engine, and cost tp GPUs per replica; at equal cost the smaller degree wins.
// A model that fits no slice of any board, nor the largest such group (Llama-3.1-405B at bf16
// on nodes of 4 H100s), makes the tenant infeasible with a NoFit reason that says how many GPUs
// a replica would need. The other tenants are still planned.
//
// # 2. Isolation, trust groups and energy
//
// Replicas share a GPU or MIG instance through MPS or time-slicing only within a sharing group:
//
//	hard    none: whole GPUs and unshared MIG instances only; never an MPS or time-slice neighbour
//	        (MPS gives no error or bandwidth isolation)
//	soft    its trust group: the tenants with the same non-empty path (exactly the same path,
//	        as v1.ValidatePlan checks); a soft tenant without a path shares only with its own
//	        replicas; never time-sliced
//	shared  every shared tenant; time-slicing only among low-frequency shared tenants
//
// Tenants of different energy classes never share a GPU (clocks are per GPU): GPUs are packed
// one board and energy class at a time. MIG instances isolate SMs and memory, so a MIG GPU may
// hold instances of tenants of any tiers and groups.
//
// The Kubernetes device plugin applies one sharing setting to every device of a resource
// (nvidia.com/mig-1g.20gb) on a node, so on one node a MIG profile's instances must all be used
// the same way (unshared, or MPS / time-sliced k ways). The planner plans twice per objective
// (section 3), four times in all — once holding
// every MIG profile of a board to one way (the way with the most replicas wins and the other
// tenants move to their best allowed candidate), once leaving it to the packer, which packs each
// way of a profile as its own class and puts each MIG GPU on the first free GPU whose node does
// not use its profiles another way — and keeps the better plan: fewest tenants short of GPUs,
// then fewest node/profile pairs shared two ways, then fewest GPUs. The device plugin also hands
// out the references of any shared device of a resource on the node, so for shared instances a
// "way" includes the trust path (shared-tier tenants count as one): one path per node and
// profile. A packed GPU no node can take under these rules is not placed; its tenants are short
// of capacity (NoCapacity) instead of planned onto devices pods could not reach as planned.
// Which unit keeps a node is decided by the packing order (group key order: exclusive before
// shared), so when a packing leaves units short for a node rule, the same choice is packed again
// with those units' groups first (planner.packFirst), and the packing with the better score is
// kept: a hard tenant's exclusive GPU placed first fixed a node's nvidia.com/gpu unshared and
// kept four shared tenants' time-sliced GPU off it, where the other order serves the four and
// leaves the one short.
// The choice sees no nodes, so when the best plan leaves tenants short while free GPUs of their
// board were left (a node rule kept their kind off every one: whole-GPU MPS needs migStrategy
// none, which a node with MIG GPUs cannot have; one sharing setting and trust path per resource
// and node; one sharing strategy per node), that kind is forbidden to those tenants and the four
// runs are made again, at most three times; the best plan of all runs is kept. A tenant still
// short names, in its NoCapacity reason, each cheaper kind a node rule kept off and the rule.
//
// The choice sees no board's GPU count either: on a fleet of several boards every tenant may
// take its cheapest board and overfill it while the others stay idle. When the best plan leaves
// units short on a board while another board where one of their tenants has a candidate keeps
// idle pool GPUs, the same retry holds every board to a limit (capBoards): its pool GPUs less
// the packing's waste there (the GPUs the packing took or lacked beyond the load the choice
// counted). The choice then adds 100 per GPU-equivalent beyond a board's limit to its objective
// (boardCap; a board's load counted as the vector objective counts it), so tenants leave a full
// board for their cheapest candidate elsewhere; a board still short loses at least what was
// left short at the next try. Such a tenant's ComputeBound reason names its cheaper candidate
// and says that board had no room for it. A node whose nvidia.com/gpu is MPS-shared serves one
// share and one trust path and takes no MIG GPU, so its other GPUs are lost to every other
// tenant: after a packing left units short for a node rule on a board, the retries count that
// board's whole-GPU MPS groups in whole nodes (countNodes; the group's GPUs rounded up to the
// board's GPUs per node, in the objective, the board limits and emptyLastUnits), and do not
// forbid those tenants' kinds on that retry. When the best plan still leaves tenants short and a
// node rule kept units off free GPUs of a board, whole-GPU MPS on that board is withheld from the
// tenants that chose it there and the retries run again, the plan kept only when it scores
// better, at most three rounds (withholdNodeMPS, ADR 0079). Last, the chosen plan's short tenants get a second chance
// (rescue): their unplaced units are packed again on the pool GPUs still idle, and then each
// tenant still short, in pool order, tries its other feasible candidates, cheapest first (a
// whole-GPU MPS candidate that would take a node of its own last), all
// replicas in the open places of placed units of the candidate's group (shared units holding
// fewer replicas than their share: a tenant of a trust path rescued after another joins its
// MPS GPU, as the packer would have put them) when those hold them all, otherwise on their own
// units under the packer's rules (greedy MIG packing); the first that
// places every replica becomes its choice, its old replicas are taken off, and its reason says
// why it moved; before that, the short tenants of one sharing group are tried together on one
// common share where that takes fewer units than each on its own cheapest (rescueGroup); after
// it, a tenant still short that holds pool GPUs alone tries its candidates, its choice among
// them, on those GPUs and the idle ones together (rescueOnOwn, ADR 0070), its replicas put back
// when none places them all. Last, while pool GPUs stay idle, a tenant still short has the
// served tenants of its choice's board moved to make room (moveServed, ADR 0072): those with a
// candidate on another board's idle GPUs go there, and it and those not moved are packed
// together on the board. A bounded search (a set found one at a time, the most room on the
// board first, then other candidates of the tenants moved, tenants left on the board, and the
// short tenant's cheapest other candidates) keeps the set of moves that places every one of
// their replicas and leaves the most pool GPUs idle; when none does its reason says what was
// tried. The step makes at most moveBudget (4,096) packings in one pass of the rescue, all short
// tenants together, fewer in proportion above 1,000 tenants (movePass, ADR 0110); those left
// untried once it is spent say so (ADR 0080). After all these, a tenant still short tries its
// MIG candidates on the free MIG room of its board's pool GPUs in use (rescueUsedMIGPass,
// rescueOnUsedMIG, ADR 0116): an empty instance of the unit's profile or a new one at a start
// the catalog's tables allow beside the GPU's instances, every instance kept where it is, on a
// GPU of the unit's energy class whose node serves the profile the unit's way; the pass is
// undone when a tenant holding placed replicas stays short; it runs in full in settle's rescue
// alone, and within the repackings of the steps after it (the step down and up of fixed counts,
// the release) seats again only the tenants it served there (ADR 0121), and within the step
// down's trials also the tenants short before them, not counted as the step's gain and on no
// fixed-count fallback kind, seated again after a kept step (ADR 0123). When
// the plan leaves tenants short while using shares finer than 1/8, the whole optimisation runs
// again on the coarse ladders and the better plan is kept (ADR 0056). A tenant still short has
// its NoCapacity reason say, per board with idle pool
// GPUs, why its cheapest candidate there found no room (a node rule, or the units against the
// room), or that none of its candidates runs on those boards, and then why none fit its own
// GPUs with the idle ones, or that it holds no GPU alone.
//
// On a node with GPUs of more than one board the device plugin advertises both boards' whole
// GPUs as nvidia.com/gpu, and instances of a profile both have as one nvidia.com/mig-<profile>,
// and hands a pod any of them; so a resource of such a node carries replicas of one board only
// (mixedboard.go): the packer's per-node uses name the board, whole GPUs there go to the largest
// board the tenants use whole and never as MPS, and the plan puts the other boards' GPUs left
// without replicas into MIG mode with no instances, so that they advertise nothing.
//
// These node rules are the device plugin's. On the DRA path (policy.kubernetesDeviceAPI: dra)
// each device is a claim with its own sharing setting and pairing, so the packer keeps none of
// them (planner.perClaim): every node takes every way, the MIG units of a board and energy
// class are packed as one class (so the ways of a profile share GPUs where that saves one: a
// way with an odd number of 1g.10gb instances, packed alone, wastes an H100 memory slice), and
// the plans are ranked by fewest tenants short, then fewest GPUs, then fewest node/profile pairs
// used two ways, kept as a tie-break.
//
// # 3. Choice and packing (the optimiser)
//
// Choice. The objective is the GPU-equivalents the slices occupy once shared units are filled:
// Σ over sharing groups (board, energy class, kind, profile, k, group) of ceil(replicas / k) ×
// unit. Each tenant starts on its cheapest candidate; local search then moves one tenant at a time
// to the candidate that lowers the objective most (joining a half-filled MPS GPU of its trust
// group is free), until no move helps. summary.objective is this value. On pools of at most 400
// tenants the search also starts from the sharing-group bound's choice (section 4: per group,
// the choice with the least rounded cost at the bound's best price; a tenant that shares with
// nobody on its cheapest candidate at that price), which fills shared units a tenant at a time
// could not, and the start that ends lower is kept. Where a tenant's cheapest candidate shares
// a whole GPU finer than 1/8 (MPS to 1/48, time-slicing to 48, tried where the memory fits and
// kept only where cheaper than every coarse share, ADR 0056) the board-wide search with the sum
// objective also starts from each tenant's cheapest on the coarse ladders (coarseSeed), and the
// lowest end is kept.
//
// On pools of any size the search also empties last units (emptyLastUnits): for each shared
// group, the tenants on its part-filled last unit (replicas mod k) leave together, each to the
// cheapest other candidate on its own board, and stay moved when together they lower the
// objective. A tenant leaving
// such a unit alone frees nothing, so the one-tenant moves never do it: two replicas of a trust
// path on their own MPS GPU (k = 8) hold a whole GPU, on two unshared 1g.10gb instances next to
// other MIG instances a quarter of one. The local search runs again after each round that
// emptied a unit (at most 8 rounds).
//
// The search reads each tenant's feasible candidates from one slice of what a move needs
// (searchCand: the group's number, replicas, unit sizes, and whether an earlier packing forbade
// the kind or a fixed sharing setting rules it out), filled before each search, and weighs the
// part of a move that the tenant's leaving contributes once for all its candidates. The values
// are those of weighing each move from scratch, added in the same order, and the groups are
// numbered in the same order, so the choice is the same to the bit. A tenant is not weighed
// at all where no move of it can lower the objective: its leaving frees no unit (every
// joining then adds at least 0, to the bit), or it was weighed without a move and no tenant
// has moved and no candidate's flags have changed since.
//
// The sum of unit sizes overcounts instances that are heavy in different resources: one 1g.20gb
// (memory 2/8, compute 1/7) and six 1g.10gb (1/8 and 1/7 each) fill one H100, while their sizes
// add up to 1.107. So the choice is also optimised, by the same local search, for the vector
// objective: per board and energy class, whole GPUs + max(Σ memory shares, Σ compute shares,
// large instances) of the MIG instances, units rounded up per sharing group as above. A large
// instance takes more than half of the GPU's memory or compute slices (4g.40gb on an H100,
// 4g.20gb on an A100 40GB, every 7g), so no two share a GPU, where the sum undercounts them:
// five 4g.40gb are 2.857 by their sizes and take five GPUs (ADR 0069). Both choices are packed
// and the plan with fewer GPUs kept (ties: the sum's).
//
// Units. The chosen replicas are grouped into units — a whole GPU (exclusive, MPS k, time-slice
// k) or a MIG instance (unshared or shared k ways) — filled group by group in pool order.
//
// MIG packing is cutting stock over layout patterns: a board's patterns are its maximal legal
// layouts (gpu.Enumerate over the planner's profiles, as count vectors); every legal layout is a
// sub-multiset of one. Greedy: each GPU takes the pattern covering the most remaining weight
// (ties: least waste). When a board and energy class have at most Options.ExactUnits instances
// (120 by default) and greedy is above the volume bound, branch and bound searches for fewer
// GPUs: the next GPU must hold the largest remaining profile (symmetry breaking), branches are
// the distinct min(pattern, remaining) takes, heaviest first, cut by GPUs so far + volume bound
// ≥ best; at most 200,000 nodes. Every GPU's instance starts come from gpu.Place on the multiset it got, so
// layouts are legal by construction (tests assert gpu.Validate on every layout).
//
// Compaction. Packing way by way leaves GPUs part-empty, so after packing the least-filled MIG
// GPUs are emptied where possible: every instance of a GPU is re-placed on the fullest other GPU
// of its board and energy class whose profile counts stay within a maximal pattern (laid out
// again by gpu.Place) and whose node takes the instance's way (compatible, as the packer
// checks; any node on the DRA path), without leaving a redundant tenant on one GPU; the GPU is freed only when all of its
// instances move. When no GPU with room is on a node that takes an instance's way, the fullest
// GPU with room whose instances, with it, an idle GPU on another node takes is moved there (a
// GPU for a GPU). A freed GPU's node gets back the uses only it had. The work is bounded
// (compactBudget target and idle GPUs looked at).
//
// GPUs are taken in fleet order per board: whole-GPU units first, then MIG GPUs. canaryGPUs get
// role canary and nothing else. The burst pool is ceil(burstPoolPercent × pool GPUs / 100) GPUs
// (rounded up, so the pool keeps at least the share the policy asks for), the last pool GPUs in
// fleet order, held free with role burst before tenants are placed; GPUs left over are idle.
// When the rest does not hold every unit, the tenants of the units left out are marked
// infeasible with NoCapacity (their other replicas stay placed). A redundant tenant whose
// replicas all landed on one GPU has one moved or swapped onto another GPU of the same group, or,
// when none has room, moved as one more MIG instance onto another GPU of the board and energy
// class whose layout and node take it, or onto an idle GPU of the board (spreadTo). When none
// does, the plan chosen frees a GPU of the board for it (spread.go, ADR 0061): a tenant that
// holds another GPU of the board alone moves to a candidate of another board whose replicas fit
// idle GPUs there, and the replica takes the freed GPU; the spread costs that GPU. When no GPU
// can be freed, the redundant tenant itself moves to another of its candidates on a board with
// idle pool GPUs whose replicas those GPUs take on distinct GPUs (relocate: packBucket, then
// spreadTo; undone when they do not).
//
// Too small a fleet (release.go, ADR 0041). Once the best packing is chosen, a tenant short of
// GPUs that holds placed replicas, or a tenant served in full on a board with no idle GPU left and
// a short tenant, gives up its placement when the pool, packed again with the same choices without
// it, serves strictly more tenants in full, every other one served before still served; candidates
// go most demand (GPU-equivalents chosen) per weight first, ties the one listed later, one at a
// time, at most 16 packings. A released tenant is infeasible with a NoCapacity reason naming the
// tenants served in its place and the GPUs it needs; a short tenant whose release serves no one
// more keeps its replicas and is reported short. After the releases each released tenant is
// packed back in, one at a time, and stays in when that serves more tenants in full and none
// served before loses it (readmitReleased, ADR 0079's amendment).
//
// Confirmation (confirm.go, ADR 0035): given a simulator (Options.Simulate; gpupool plan passes
// internal/plansim.Run, internal/sim's), on pools of at most 64 tenants Build then simulates the
// chosen plan in three runs of fixed seeds (Options.ConfirmSeed and the next two) within
// Options.ConfirmRequests requests a run. A tenant the queueing model sized (not bursty; diurnal
// only in runs of at most an hour, which carry its peak, ADR 0071), served in full, with less
// than 99.5 % of its requests over the runs (or 99.25 % in one run) within the SLO gets a
// replica more on its chosen slice, and choice, packing and simulation run again, at most
// four rounds. A tenant those runs pass on a borderline result (below 99.9 % over the runs or
// 99.7 % in one, or a p99 above 90 % of its target, ADR 0089) is judged on six runs more: it passes when the estimated chance that one run
// of 2,000 requests falls below 99 % is at most 2 % (confirmextra.go, ADR 0078); where only the
// estimate's spread floor fails it, it is judged on its tail, 40 runs of 2,000 of its requests
// of which at most 2 may fall below 99 % (ADR 0083). A busy tenant, its rate above 80 % of what
// its count sustains at any latency (the model's saturation), that those runs pass is
// simulated over 200,000 of its requests more in four long runs and is short below 99.5 % over
// them, or where their spread puts a run of 2,000 below 99 % at more than 2 % (confirmbusy.go,
// ADR 0128): near saturation it misses in rare long busy spells that short runs seldom hold. A
// raise that choosing and packing again would make at the cost of more tenants
// short of GPUs is made on the round's plan instead, by the rescue's move of served tenants off
// the raised tenant's board onto idle GPUs of other boards (raiseByMoves, ADR 0075); when that
// too seats none and several tenants were raised, the raises that fit are kept one at a time,
// fewest extra GPUs first (raiseSubset, ADR 0081), the others reported short; when none fits,
// the raises are undone and the best round kept. Counts only rise;
// every simulated tenant carries a Simulated reason. A re-plan that returns the kept, held or
// partly re-packed plan confirms that plan the same way (confirmkept.go, ADR 0064, 0065): a
// tenant found short gets a replica more in room its busy GPUs leave free, else on a GPU the plan
// leaves idle of its board in force, else is reported short; a tenant so reported, or a GPU so
// added, makes the re-plan weigh its plans again.
//
// # 4. Lower bound
//
// summary.lowerBound is a proven lower bound on the GPUs any plan needs for the tenants that can
// be served, over the candidate slice kinds and every share of a GPU or MIG instance a plan may
// use (MPS up to 48 replicas, the most clients an MPS server runs; time-slicing up to the finest
// share that fits the memory), each of a unit's k replicas getting at most 1/k of its memory and,
// under MPS, 100/k % of its SMs. Shares the ladders do not try are columns of the bound alone
// (fineShareBound): a share between two ladder shares k1 < k2 counts as 1/(k2 − 1) of a unit at
// the bound's count of k1, a share past the last as the finest that fits at the last's count,
// since a replica with less memory and no more SMs needs no fewer replicas
// (TestBoundCountMonotoneInShare). The bound is the larger of
//
//   - the LP relaxation of the pattern formulation with tenant choice,
//     min Σ_p x_p + Σ_{t,c whole} (r_tc/k_c) y_tc  s.t. Σ_c y_tc = 1,
//     Σ_p a_pP x_p ≥ Σ_{t,c MIG P} (r_tc/k_c) y_tc, x, y ≥ 0,
//     solved with gonum's simplex (lp.Simplex) when it has at most Options.LPVariables columns,
//     started from a feasible basis (each class's cheapest whole-GPU choice, every coverage
//     row's surplus) when every class has a whole-GPU choice, which spares the solver's own
//     search for one and reaches the same optimum.
//     Of a tenant's candidates on one board and profile only the smallest r_tc/k_c is kept, and
//     tenants with the same reduced columns form one class whose choice row sums to its size:
//     neither changes the optimum, and it keeps the LP to a few hundred columns at 1,000
//     tenants. Degenerate or failing solves fall back to
//   - the sharing-group bound, on pools of at most 2,000 tenants: with the same prices, every
//     plan costs at least Σ over sharing groups of ceil(replicas / share) × price, and tenants
//     interact only within their group, so the minimum splits into one small problem per group
//     (sharing group and energy class), solved exactly by branch and bound (a group that takes
//     more than 40,000 nodes counts its fractional sum; the groups given up on are searched
//     again, fewest tenants first, with up to 400,000 nodes each while 1,000,000 remain for the
//     bound and a finished group could still lift it by a GPU). Where every unit price of a
//     group is a whole multiple of a step 1/q (q ≤ 64: 1/8 of an H100 at λ = 1, whole GPUs),
//     every plan's cost is too, so the search cuts a node when its bound rounded up to the step
//     reaches the best found, and a group given up on counts its fractional sum rounded up to
//     the step (ADR 0058); taken at the 4 best prices of the grid
//     on pools of at most 400 tenants (which also seed the choice's local search from it), at the
//     best one above.
//     The search drops unit kinds another kind dominates (no dearer per unit, at least as many
//     places, open to every tenant of the first with no more replicas: moving those tenants over
//     never costs more, the ceiling being subadditive), takes tenants alike in a fixed order
//     (symmetry), tries first the branches that add least now, and cuts a node when its cost plus
//     the remaining tenants' cheapest fractional prices, less what the free places of open units
//     could save them (per kind, at most the places' worth and at most what the tenants able to
//     use that kind would pay there), reaches the best found;
//   - the Lagrangian volume bound: with prices λ·memory share + (1−λ)·compute share per MIG
//     instance and 1 per whole GPU, every GPU's contents cost at most 1, so Σ over tenants of
//     their cheapest candidate's price bounds the GPUs for every λ (weak duality); the best λ of
//     21 is kept;
//   - on a fleet of several boards, the same with each board's GPUs N_b as a limit
//     (boardCapBound, ADR 0098): for multipliers μ_b ≥ 0, Σ over tenants of their cheapest
//     candidate's price × (1 + μ of its board) − Σ_b μ_b N_b, the multipliers found by projected
//     subgradient ascent at each λ; tenants the packing left short of GPUs are left out of it.
//
// In all three r_tc is the candidate's lower bound count, not the planner's: the fewest replicas
// that keep up with the tenant's load on that slice kind (the queueing model's saturation
// count), or the TTFT floor where higher, both computed with idle neighbours (no other process
// on the GPU or instance in a step, the rest of the board idle), because a plan may put a busy
// tenant beside quiet ones, and the sizing's worst case of busy neighbours would then exclude
// plans that serve it (ADR 0032). For the same reason a tenant's candidates there are its
// feasible ones and those the sizing rejects only under busy neighbours (an SLO check that
// fails with every neighbour busy, a busy count above maxReplicas or the fleet, a kind
// fixedSlices drops): the bound keeps them at their idle-neighbour count and leaves a kind out
// only for reasons no neighbour load changes (boundAdmits).
//
// All are rounded up; each assumes, as the planner does, that all replicas of a tenant use one
// kind of slice. The bound ignores canaries, the burst pool, the one-sharing-setting rule and
// (outside the group bound) trust-group rounding, so it stays valid; the gap GPUsUsed / lowerBound
// shows what they and the heuristics cost. The result computes the bound on a goroutine of its
// own while it computes the tenants' predictions, which write nothing the bound reads; the
// reasons, objective and baselines are made after both (ADR 0076).
//
// # 5. Baselines
//
// On the same served tenants, sized by the same model, ignoring the fleet's size:
//
//	exclusive       one whole GPU per replica (the fewest replicas over boards)
//	mig-first-fit   the smallest MIG profile that fits and meets the SLO, first fit over GPUs
//	rule-of-thumb   the articles' four steps taken literally: a replica over 85% of a GPU's
//	                memory or a tenant over 70% of a GPU's rate gets whole GPUs; low-frequency
//	                tenants are time-sliced 8 to a GPU; models whose weights exceed a quarter of
//	                the GPU get the smallest serving MIG profile (first fit); the rest share GPUs
//	                four ways through MPS
//
// A baseline's count for a tenant does not rest on a count the plan's simulation found short
// (ADR 0074): where the runs judged one of the tenant's candidates of the very slice a baseline
// gives it (whole GPUs, or one MIG profile, of one board, one replica a slice: no neighbour to
// change what the runs saw), the baseline takes the count they passed, or one more than a count
// they found short, when that is above the model's; and a tenant the runs raised on whole GPUs
// counts at least the GPUs its choice takes in exclusive (another board's model count does not
// undercut it). The baselines are not simulated themselves: a baseline is Confirmed when every
// tenant's count in it is one the runs passed, which MPS and time-sliced counts never are (their
// runs had other neighbours); the rest are the model's, and say so.
//
// # 6. Reasons
//
// Every tenant carries the four steps with numbers: memory (MemoryBound, or ComputeBound when a
// larger slice than the smallest that fits was chosen) with weights, KV cache and workspace;
// compute (ComputeBound) with the rate one replica sustains, the replicas and their cost, and the
// next cheapest alternative; SLO shape and isolation (SLOShapeUniform, IsolationHard, TrustGroup
// or LowFrequency); fairness (FixedReplicas, Redundancy, EnergyClass); what the tier and policy
// exclude (IsolationHard, TrustGroup, ModeNotAllowed); then up to three rejected alternatives
// with their code, cost per replica and why. Every GPU says why its role, mode and layout
// (Canary, BurstPool, Idle, TrustGroup for MPS, LowFrequency for time-slicing, SLOShapeUniform or
// SLOShapeMixed for MIG by the spread of its tenants' TTFT targets, EnergyClass).
//
// # 7. Limits per replica
//
// MPS replicas carry limits.smPercent and limits.memory (the pinned-memory cap); time-sliced
// replicas limits.memory and timeSliceReplicas 1; every replica the vLLM arguments of its fit.
//
// # 8. Re-planning
//
// With Options.Current (the plan in force) the planned GPU configurations — mode, MIG instances
// and their sharing — are moved between GPUs of the same board so that as many GPUs as possible
// keep theirs: a configuration goes first to a GPU that already runs it (keeping its current
// instance starts), then to a GPU that runs nothing now; before that, a tensor-parallel group
// that would land on GPUs its tenant's old groups hold trades places with idle GPUs of one node
// that run nothing now, when there are enough (regroupOnFree), so that it starts before they
// stop. Replicas may still move between equal slices (a pod move, not a GPU change). Migration lists the GPUs whose mode or layout changes:
// GPUs that run nothing first, in one wave, then busy GPUs, each drained, at most
// policy.maxUnavailable per wave; replicas start, move (start, wait, stop), restart (stop, then
// start: a tensor-parallel group onto GPUs its tenant's old groups hold, after clearing stops; a
// replica on a drained GPU that stays on it, in its slot or a new MIG instance, after the drain)
// or stop (a replica on a drained GPU before that drain). A move changes GPU; what stays on its
// GPU is a reconfiguration, listed but not counted as a move. The re-pack is weighed against the kept plan (movebudget.go): the plan in force for every
// tenant whose replicas there still meet its SLO where they run (the queueing model on their
// slice, at the load now), the others — new tenants, those their replicas no longer carry —
// started first in the room its busy GPUs keep free (fillkept.go: an empty MIG instance, MPS or
// time-slice room of the same group; a start, no GPU change), the rest planned alone on the GPUs
// it leaves idle (ADR 0059), both keeping each node's device-plugin MPS setting (nodeshare.go:
// room fills a whole-GPU MPS GPU only to its node's finest share; a placement on idle GPUs that
// breaks a node's setting is made again without that node's idle GPUs; ADR 0060). DevicePluginChanges
// lists the nodes whose device-plugin sharing setting a migration changes, which no GPU step
// carries (devplugin.go), and OrderDevicePluginChanges puts each into the migration's waves as a
// node-config step, with the restarts of the running MPS clients a node's daemon restart reaches
// (nodeconfig.go; ADR 0062). The one with the fewest tenants short, then GPUs,
// then replica moves, then MPS clients restarted by its node config changes (NodeConfigRestarts,
// the migration's own count; not against the budget), then GPU changes is returned, so a
// re-pack that saves no GPU is not made; when the kept plan's starts in room restart MPS
// clients, the kept plan with nothing started in room is weighed too (ADR 0062, amendment).
// With Options.MaxMoves only plans within the budget count, and none that leaves a tenant short
// the re-pack serves; above the budget the components of the change that free the most GPUs
// within it (partialmoves.go) are weighed too. When none of those serves every tenant the
// re-pack serves, the best within the budget is returned with the tenants it leaves short and
// why (the plan in force held as it is, every tenant keeping what it runs), and only when that
// would stop a tenant that runs now does Build fail, naming the tenants that must move. The packing itself does not weigh changes against GPUs saved.
//
// # 9. Measured profiles
//
// A tenant with an entry in Options.Profiles (its measured table, read by the caller) is sized by
// ParvaGPU's rule instead of llm and perf's models, and its model name need not be in the LLM
// catalog. The latency SLO is slo.e2eP99 (Build fails without it); a batch's measured latency may
// take at most 0.45 × of it. A slice is looked up by GPCs: a MIG instance by its profile's compute
// slices, a whole GPU by the board's; an MPS share 1/k is k processes, k ≤ 3; no time-slicing.
// A (GPCs, processes) with no runnable row does not fit (NoFit); one whose fastest batch is over
// the limit is SLOUnmet. One replica is one process, sustaining the per-process throughput of
// the highest-throughput row within the limit; replicas = ceil(rps / rate). Reasons carry
// MeasuredProfile; the predicted p99 end-to-end latency is 2 × the batch latency; replicas carry
// no vLLM arguments. CheckMeasured checks any plan against this rule on its own (alone on its
// instance, at most 3 processes, a runnable batch within 0.45 × the SLO, the rate carried).
// ParvaGPU's six scenarios plan to 2, 3, 5, 7, 13 and 16 GPUs, as ParvaGPU deployed
// (TestParvaGPUBuild).
//
// # 10. Planned power
//
// ReplicaPower gives every replica of a plan its mean power above idle at its tenant's offered
// rate (perf.Engine.PowerAt on the replica's slice), for the cost rule's planned basis
// (docs/cost.md); replicas it cannot model are left to the rule's coarse estimate.
//
// # Not done
//
// Tensor parallelism across GPUs. The measured table does not name its board: it is applied by
// GPCs to every board of the fleet.
//
// # Shared LoRA engines
//
// GroupLoRA groups a Pool's adapter tenants by base model, quantization and sharing group (a hard
// tenant never shares an engine process); PlanLoRA gives a group the fewest whole-GPU engines on
// which the queueing model (queue.go) keeps the strictest objective of each engine's adapters,
// with the KV cache the adapter slots leave and the LoRA kernels' time charged; max_loras is twice
// the p99 of adapters in flight, rounded up to a power of two, or every adapter of the engine when
// that is fewer; adapters go to engines largest rate
// first (LPT), a hot one spread over several. Every adapter gets a reason and a fair share of its
// engine (docs/lora.md). BuildWithLoRA plans a whole pool: the shared groups by PlanLoRA on each
// board of the fleet that holds their base model (LoRAFleetGroups, PlanLoRABoards; a plan of the
// other tenants made otherwise, such as the simulator's uniform plan, may use them too), the other
// tenants by Build, then PlaceLoRAEngines puts the engines on whole GPUs Build leaves idle, each
// group on its preferred board when that has room, else another, else spilling over boards,
// and records them (Plan.LoRAEngines); LoRABound is their lower bound by decode throughput,
// which does not look at the planner's engines. An engine is sized for the widest
// traffic.lengths among its adapters (lengths.go's terms), and what its queueing model predicts
// (LoRAEngine.Predicted: p99 TTFT and TPOT with the LoRA kernels, its max rate) is each adapter
// tenant's prediction in the Plan: the worst of its engines, and as max rate its own load plus
// its engines' headroom. Given a LoRA engine simulator (Options.SimulateLoRA; gpupool plan passes
// internal/plansim.RunLoRA), BuildWithLoRA confirms each group's engines before placing them
// (confirm_lora.go, the dense tenants' rules since ADR 0095): three runs of each engine with its
// adapters' traffic, six more and the tail runs where an engine or an adapter of 1,500 requests
// or more is borderline; a group with one short gets one engine more (re-binned) while its board
// has an idle GPU, else its short adapters are infeasible with a NoCapacity reason giving the
// measured attainment. Groups whose first runs are clear keep the model's plan. A group's
// adapters are of one energy class, and its engines are sized and run at that class's clock
// lock (LoRAGroupClock, ADR 0095).
package plan
