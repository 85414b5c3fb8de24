"""Building blocks against explicit re-statements of the official formulas: Painter's attention
with decomposed relative positions (ViTDet ``add_decomposed_rel_pos``), the VQGAN's pixel
attention and nearest-code quantisation."""

import torch

from icl.models.vicl._vit import Attention
from icl.models.vicl._vqgan import AttnBlock, VectorQuantizer


def test_rel_pos_attention_matches_the_explicit_formula():
    torch.manual_seed(0)
    gh, gw, dim, heads = 4, 3, 16, 2
    attn = Attention(dim, heads, rel_pos_size=(gh, gw))
    with torch.no_grad():
        attn.rel_pos_h.normal_()
        attn.rel_pos_w.normal_()
    x = torch.randn(2, gh * gw, dim)
    hd = dim // heads
    q, k, v = attn.qkv(x).reshape(2, gh * gw, 3, heads, hd).permute(2, 0, 3, 1, 4).reshape(3, 2 * heads, gh * gw, hd)
    logits = (q * hd ** -0.5) @ k.transpose(-2, -1)
    rq = q.reshape(2 * heads, gh, gw, hd)
    for b in range(2 * heads):
        for qy in range(gh):
            for qx in range(gw):
                for ky in range(gh):
                    for kx in range(gw):
                        rh = attn.rel_pos_h[qy - ky + gh - 1]
                        rw = attn.rel_pos_w[qx - kx + gw - 1]
                        logits[b, qy * gw + qx, ky * gw + kx] += rq[b, qy, qx] @ rh + rq[b, qy, qx] @ rw
    out = (logits.softmax(-1) @ v).reshape(2, heads, gh * gw, hd).transpose(1, 2).reshape(2, gh * gw, dim)
    torch.testing.assert_close(attn(x), attn.proj(out), atol=1e-5, rtol=1e-5)


def test_vqgan_attention_and_quantiser():
    torch.manual_seed(1)
    blk = AttnBlock(8, 4)
    x = torch.randn(2, 8, 3, 5)
    n = blk.norm(x)
    q, k, v = (t.reshape(2, 8, 15) for t in (blk.q(n), blk.k(n), blk.v(n)))
    w = (q.transpose(1, 2) @ k * 8 ** -0.5).softmax(-1)  # taming: softmax over keys of q^T k / sqrt(c)
    ref = x + blk.proj_out((v @ w.transpose(1, 2)).reshape(2, 8, 3, 5))
    torch.testing.assert_close(blk(x), ref, atol=1e-5, rtol=1e-5)
    vq = VectorQuantizer(32, 4)
    z = torch.randn(2, 4, 3, 3)
    flat = z.permute(0, 2, 3, 1).reshape(-1, 4)
    expect = torch.cdist(flat, vq.embedding.weight).argmin(1).reshape(2, 3, 3)
    assert torch.equal(vq.codes(z), expect)
    torch.testing.assert_close(vq.entries(expect), vq.embedding.weight[expect].permute(0, 3, 1, 2))


def test_grid_bias_in_head_dimensions_equals_the_dense_mask():
    """Painter's decomposed relative-position bias (ViTDet ``add_decomposed_rel_pos``) carried
    in extra head dimensions (the CUDA path) equals the dense N x N additive mask (CPU path)."""
    from icl.models.vicl._vit import Attention

    torch.manual_seed(0)
    attn = Attention(32, 2, rel_pos_size=(6, 3))
    with torch.no_grad():
        attn.rel_pos_h.normal_(0, 0.5)
        attn.rel_pos_w.normal_(0, 0.5)
    x = torch.randn(3, 18, 32)
    with torch.no_grad():
        dense = attn(x, dense_bias=True)
        grid = attn(x, dense_bias=False)
        plain = Attention(32, 2)
        plain.load_state_dict({k: v for k, v in attn.state_dict().items() if "rel_pos" not in k})
        assert not torch.allclose(plain(x), dense, atol=1e-3)  # the bias matters
    torch.testing.assert_close(grid, dense, atol=2e-6, rtol=1e-5)
