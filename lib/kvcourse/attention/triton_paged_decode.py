"""PagedAttention decode in Triton: one new query token per sequence against a paged KV cache (§4).

Decode attention reads every cached key and value of a sequence once and does very little arithmetic
with them, so its speed is set by how fast K and V stream out of memory. The two kernels below are
written around that fact.

``paged_decode_kernel`` -- one program per (sequence, KV head, split):

* **GQA grouping.** All query heads that share one KV head are handled by the same program, as the
  rows of one small matrix ``q`` of shape ``[GROUP_PAD, HEAD_DIM_PAD]``. Each K and V tile is then
  read once and used by the whole group through ``tl.dot``. ``tl.dot`` needs at least 16 rows on a
  GPU, so the group is padded to a power of two of at least 16 with masked rows (never stored).
* **Padded heads.** Triton tiles are powers of two, and real models have heads of 80, 96, 112 or
  192. The head axis is therefore ``HEAD_DIM_PAD`` wide (the next power of two, at least 16) and
  every load and store along it is masked with ``offs_d < HEAD_DIM``: the extra columns of ``q``,
  K and V load as 0, so they add nothing to a score, and the extra output columns are never
  written. For a power of two ``HEAD_DIM_PAD == HEAD_DIM`` and the mask is always true. The tensors
  themselves are not copied or padded.
* **Paged tiles.** The program walks its tokens ``TILE`` at a time. Token ``t`` of a sequence lives
  in logical page ``t // BLOCK_SIZE`` at slot ``t % BLOCK_SIZE``; the block table turns the logical
  page into a physical one. A tile may span several pages (small blocks) or be part of one page
  (large blocks): each token row is gathered on its own, so both cases are the same code.
* **Prefetched block-table entries.** The page ids of the next tile are loaded one iteration early.
  The address of every K/V load is then known when its iteration starts, which lets the compiler
  keep several tiles' loads in flight (software pipelining, ``num_stages``).
* **Online softmax.** A running maximum ``m``, a running sum ``l`` and an unnormalised output
  ``acc`` are rescaled as each tile arrives (the FlashAttention recurrence), so the scores of a long
  context are never stored. Exponentials are base 2 (``exp2``), with ``log2(e)`` folded into the
  scale.
* **Split-KV (flash-decoding).** With few sequences and long contexts, one program per (sequence,
  KV head) would leave most of the GPU idle. The context is then cut into ``num_splits`` chunks of
  whole tiles, each handled by its own program, which writes its normalised partial output and its
  log-sum-exp ``lse = m + log2(l)``.

``combine_splits_kernel`` -- one program per (sequence, query head) merges the partial results,
``out = sum_s 2^(lse_s - M) * out_s / sum_s 2^(lse_s - M)`` with ``M = max_s lse_s``, which is
exactly the softmax over the whole context.

Accumulation is in float32 whatever the input type. Import this module through
:mod:`kvcourse.attention.paged_decode`, whose wrapper checks the arguments and picks the launch
configuration.
"""

from kvcourse.attention.backend import load_triton

triton = load_triton()
if triton is None:  # pragma: no cover - only where Triton is not installed
    raise ImportError(
        "Triton is not installed, so the paged-attention kernels cannot be built; use "
        "kvcourse.attention.paged_decode.paged_decode_attention, which falls back to the reference"
    )

import triton.language as tl  # noqa: E402  (imported after load_triton chose the mode)


@triton.jit
def paged_decode_kernel(
    q_ptr,  # [batch, q_heads, HEAD_DIM]
    k_cache_ptr,  # [num_blocks, BLOCK_SIZE, kv_heads, HEAD_DIM]
    v_cache_ptr,  # same shape as the K cache
    block_tables_ptr,  # [batch, max_blocks] int32: logical page -> physical page
    seq_lens_ptr,  # [batch]: tokens in each sequence's cache
    out_ptr,  # [batch, q_heads, HEAD_DIM], written when SPLIT is False
    part_out_ptr,  # [batch, q_heads, num_splits, HEAD_DIM] float32, written when SPLIT is True
    part_lse_ptr,  # [batch, q_heads, num_splits] float32, written when SPLIT is True
    qk_scale,  # softmax scale times log2(e)
    num_kv_heads,
    num_splits,
    stride_q_batch,
    stride_q_head,
    stride_q_dim,
    stride_k_block,
    stride_k_slot,
    stride_k_head,
    stride_k_dim,
    stride_v_block,
    stride_v_slot,
    stride_v_head,
    stride_v_dim,
    stride_table_batch,
    stride_table_page,
    stride_seq_lens,
    stride_out_batch,
    stride_out_head,
    stride_out_dim,
    GROUP: tl.constexpr,  # query heads per KV head
    GROUP_PAD: tl.constexpr,  # GROUP rounded up to a power of two, at least 16
    HEAD_DIM: tl.constexpr,  # the head size of the tensors
    HEAD_DIM_PAD: tl.constexpr,  # HEAD_DIM rounded up to a power of two, at least 16
    BLOCK_SIZE: tl.constexpr,  # tokens per page
    TILE: tl.constexpr,  # tokens per loop iteration
    SPLIT: tl.constexpr,  # True: write partial results for combine_splits_kernel
    DOT_PRECISION: tl.constexpr,  # "ieee" for float32 inputs (exact), ignored for 16-bit inputs
):
    batch = tl.program_id(0) // num_kv_heads
    kv_head = tl.program_id(0) % num_kv_heads
    split = tl.program_id(1)

    # This program's token range [lo, hi): the sequence's tiles, cut into num_splits equal chunks.
    # A short sequence may leave the last splits empty (lo >= hi): they run no iterations.
    seq_len = tl.load(seq_lens_ptr + batch * stride_seq_lens).to(tl.int32)
    tiles_per_split = tl.cdiv(tl.cdiv(seq_len, TILE), num_splits)
    lo = split * tiles_per_split * TILE
    hi = tl.minimum(lo + tiles_per_split * TILE, seq_len)

    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    offs_t = tl.arange(0, TILE)
    q_heads = kv_head * GROUP + offs_g
    head_mask = offs_g < GROUP  # the padding rows beyond the group
    dim_mask = offs_d < HEAD_DIM  # the padding columns beyond the head
    q_mask = head_mask[:, None] & dim_mask[None, :]

    # The group's queries, one row per query head: [GROUP_PAD, HEAD_DIM_PAD].
    q_ptrs = (
        q_ptr
        + batch * stride_q_batch
        + q_heads[:, None] * stride_q_head
        + offs_d[None, :] * stride_q_dim
    )
    q = tl.load(q_ptrs, mask=q_mask, other=0.0)

    k_head_ptr = k_cache_ptr + kv_head * stride_k_head
    v_head_ptr = v_cache_ptr + kv_head * stride_v_head
    table_ptr = block_tables_ptr + batch * stride_table_batch

    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)  # running max of the scores
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)  # running sum of exp2(score - m_i)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM_PAD], dtype=tl.float32)  # running sum of weights times V

    # Physical page of every token of the first tile (tokens of one page share an entry).
    tok = lo + offs_t
    page = tl.load(table_ptr + (tok // BLOCK_SIZE) * stride_table_page, mask=tok < hi, other=0)

    for start in tl.range(lo, hi, TILE):
        tok = start + offs_t
        in_range = tok < hi

        # Fetch the next tile's page ids now, so the K/V addresses of the next iteration do not
        # wait on a block-table load at its start.
        next_tok = tok + TILE
        next_page = tl.load(
            table_ptr + (next_tok // BLOCK_SIZE) * stride_table_page, mask=next_tok < hi, other=0
        )

        # Gather the tile's K and V rows, [TILE, HEAD_DIM_PAD] each, through the block table. The
        # page id is widened to 64 bits: page * stride can pass 2**31 in a large cache.
        slot = tok % BLOCK_SIZE
        k_rows = page.to(tl.int64) * stride_k_block + slot * stride_k_slot
        v_rows = page.to(tl.int64) * stride_v_block + slot * stride_v_slot
        kv_mask = in_range[:, None] & dim_mask[None, :]
        k = tl.load(
            k_head_ptr + k_rows[:, None] + offs_d[None, :] * stride_k_dim, mask=kv_mask, other=0.0
        )
        v = tl.load(
            v_head_ptr + v_rows[:, None] + offs_d[None, :] * stride_v_dim, mask=kv_mask, other=0.0
        )

        # Scores of the whole group against the tile, [GROUP_PAD, TILE], in log2 units.
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
        scores = tl.where(in_range[None, :], scores, float("-inf"))

        # Online softmax: raise the running max, rescale what was summed so far, add this tile.
        # Every tile holds at least one token in range, so m_new is finite.
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new

        page = next_page

    # An empty split has l_i == 0 and acc == 0; dividing by 1 instead keeps its output at 0.
    l_safe = tl.where(l_i > 0.0, l_i, 1.0)
    out = acc / l_safe[:, None]

    if SPLIT:
        # Row (batch, q_head, split) of the contiguous partial buffers. An empty split stores
        # out = 0 and lse = -inf, which gives it weight zero in the combine.
        num_q_heads = num_kv_heads * GROUP
        row = (batch * num_q_heads + q_heads) * num_splits + split
        tl.store(part_out_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], out, mask=q_mask)
        tl.store(part_lse_ptr + row, m_i + tl.log2(l_safe), mask=head_mask)
    else:
        out_ptrs = (
            out_ptr
            + batch * stride_out_batch
            + q_heads[:, None] * stride_out_head
            + offs_d[None, :] * stride_out_dim
        )
        tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=q_mask)


@triton.jit
def combine_splits_kernel(
    part_out_ptr,  # [batch, q_heads, num_splits, HEAD_DIM] float32
    part_lse_ptr,  # [batch, q_heads, num_splits] float32, log2 units
    out_ptr,  # [batch, q_heads, HEAD_DIM]
    num_q_heads,
    num_splits,
    stride_out_batch,
    stride_out_head,
    stride_out_dim,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,  # HEAD_DIM rounded up to a power of two
    SPLITS_PAD: tl.constexpr,  # num_splits rounded up to a power of two
    CHUNK: tl.constexpr,  # partial outputs merged per loop iteration (bounds register use)
):
    batch = tl.program_id(0)
    q_head = tl.program_id(1)
    first_row = (batch * num_q_heads + q_head) * num_splits  # row of split 0

    # Weight of split s: 2^(lse_s - M), its share of the softmax denominator relative to the
    # largest. Split 0 always holds tokens, so M is finite; empty splits (lse = -inf) weigh 0.
    offs_s = tl.arange(0, SPLITS_PAD)
    lse = tl.load(part_lse_ptr + first_row + offs_s, mask=offs_s < num_splits, other=float("-inf"))
    lse_max = tl.max(lse, axis=0)
    denominator = tl.sum(tl.exp2(lse - lse_max), axis=0)

    offs_d = tl.arange(0, HEAD_DIM_PAD)
    dim_mask = offs_d < HEAD_DIM
    acc = tl.zeros([HEAD_DIM_PAD], dtype=tl.float32)
    for chunk_start in tl.range(0, num_splits, CHUNK):
        split = chunk_start + tl.arange(0, CHUNK)
        is_split = split < num_splits
        weight = tl.exp2(
            tl.load(part_lse_ptr + first_row + split, mask=is_split, other=float("-inf")) - lse_max
        )
        part = tl.load(
            part_out_ptr + (first_row + split)[:, None] * HEAD_DIM + offs_d[None, :],
            mask=is_split[:, None] & dim_mask[None, :],
            other=0.0,
        )
        acc += tl.sum(weight[:, None] * part, axis=0)

    out_ptrs = out_ptr + batch * stride_out_batch + q_head * stride_out_head
    out = (acc / denominator).to(out_ptr.dtype.element_ty)
    tl.store(out_ptrs + offs_d * stride_out_dim, out, mask=dim_mask)
