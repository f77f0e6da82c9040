"""``nn.Module`` translations into the functional handlers (parameters become kernel inputs)."""

from __future__ import annotations

from .. import values as Vs
from ..errors import UnsupportedOpError
from .base import OpsBase
from .common import UNARY
from .registry import module


class ModuleOps(OpsBase):
    @module('Linear')
    def m_Linear(self, q, m, x):
        return self.f_linear(x, self._p(q, m, "weight"), self._p(q, m, "bias"))

    @module('Bilinear')
    def m_Bilinear(self, q, m, x1, x2):
        return self.f_bilinear(x1, x2, self._p(q, m, "weight"), self._p(q, m, "bias"))

    @module('Identity')
    def m_Identity(self, q, m, x, *a, **k):
        return x

    def _conv_mod(self, nd, q, m, x):
        if m.padding_mode != "zeros":
            raise UnsupportedOpError(f"convolution padding_mode={m.padding_mode!r} (only 'zeros')")
        return self._conv(nd, x, self._p(q, m, "weight"), self._p(q, m, "bias"), m.stride, m.padding, m.dilation,
                          m.groups)

    @module('Conv1d')
    def m_Conv1d(self, q, m, x):
        return self._conv_mod(1, q, m, x)

    @module('Conv2d')
    def m_Conv2d(self, q, m, x):
        return self._conv_mod(2, q, m, x)

    @module('Conv3d')
    def m_Conv3d(self, q, m, x):
        return self._conv_mod(3, q, m, x)

    def _convt_mod(self, nd, q, m, x, output_size=None):
        if output_size is not None:
            raise UnsupportedOpError("ConvTranspose with output_size")
        if m.padding_mode != "zeros":
            raise UnsupportedOpError(f"padding_mode={m.padding_mode!r}")
        return self._conv_t(nd, x, self._p(q, m, "weight"), self._p(q, m, "bias"), m.stride, m.padding,
                            m.output_padding, m.groups, m.dilation)

    @module('ConvTranspose1d')
    def m_ConvTranspose1d(self, q, m, x, output_size=None):
        return self._convt_mod(1, q, m, x, output_size)

    @module('ConvTranspose2d')
    def m_ConvTranspose2d(self, q, m, x, output_size=None):
        return self._convt_mod(2, q, m, x, output_size)

    @module('ConvTranspose3d')
    def m_ConvTranspose3d(self, q, m, x, output_size=None):
        return self._convt_mod(3, q, m, x, output_size)

    def _maxpool_mod(self, nd, m, x):
        return self._max_pool(nd, x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, m.return_indices)

    @module('MaxPool1d')
    def m_MaxPool1d(self, q, m, x):
        return self._maxpool_mod(1, m, x)

    @module('MaxPool2d')
    def m_MaxPool2d(self, q, m, x):
        return self._maxpool_mod(2, m, x)

    @module('MaxPool3d')
    def m_MaxPool3d(self, q, m, x):
        return self._maxpool_mod(3, m, x)

    @module('AvgPool1d')
    def m_AvgPool1d(self, q, m, x):
        return self._avg_pool(1, x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad)

    @module('AvgPool2d')
    def m_AvgPool2d(self, q, m, x):
        return self._avg_pool(2, x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad,
                              m.divisor_override)

    @module('AvgPool3d')
    def m_AvgPool3d(self, q, m, x):
        return self._avg_pool(3, x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad,
                              m.divisor_override)

    @module('AdaptiveAvgPool1d')
    def m_AdaptiveAvgPool1d(self, q, m, x):
        return self._adaptive(1, x, m.output_size, "avg")

    @module('AdaptiveAvgPool2d')
    def m_AdaptiveAvgPool2d(self, q, m, x):
        return self._adaptive(2, x, m.output_size, "avg")

    @module('AdaptiveAvgPool3d')
    def m_AdaptiveAvgPool3d(self, q, m, x):
        return self._adaptive(3, x, m.output_size, "avg")

    @module('AdaptiveMaxPool1d')
    def m_AdaptiveMaxPool1d(self, q, m, x):
        return self.f_adaptive_max_pool1d(x, m.output_size, m.return_indices)

    @module('AdaptiveMaxPool2d')
    def m_AdaptiveMaxPool2d(self, q, m, x):
        return self.f_adaptive_max_pool2d(x, m.output_size, m.return_indices)

    @module('AdaptiveMaxPool3d')
    def m_AdaptiveMaxPool3d(self, q, m, x):
        return self.f_adaptive_max_pool3d(x, m.output_size, m.return_indices)

    def _bn_mod(self, q, m, x):
        use_batch = m.training or not m.track_running_stats or m.running_mean is None
        w = self._p(q, m, "weight") if m.affine else None
        b = self._p(q, m, "bias") if m.affine else None
        if use_batch:
            return self.f_batch_norm(x, None, None, w, b, True, m.momentum, m.eps)
        return self.f_batch_norm(x, self._p(q, m, "running_mean"), self._p(q, m, "running_var"), w, b, False,
                                 m.momentum, m.eps)

    m_BatchNorm1d = m_BatchNorm2d = m_BatchNorm3d = module('BatchNorm1d', 'BatchNorm2d', 'BatchNorm3d')(_bn_mod)

    def _in_mod(self, q, m, x):
        w = self._p(q, m, "weight") if m.affine else None
        b = self._p(q, m, "bias") if m.affine else None
        use_input = m.training or not m.track_running_stats
        if use_input:
            return self.f_instance_norm(x, None, None, w, b, True, m.momentum, m.eps)
        return self.f_instance_norm(x, self._p(q, m, "running_mean"), self._p(q, m, "running_var"), w, b, False,
                                    m.momentum, m.eps)

    m_InstanceNorm1d = m_InstanceNorm2d = m_InstanceNorm3d = module('InstanceNorm1d', 'InstanceNorm2d', 'InstanceNorm3d')(_in_mod)

    @module('LayerNorm')
    def m_LayerNorm(self, q, m, x):
        return self.f_layer_norm(x, m.normalized_shape, self._p(q, m, "weight"), self._p(q, m, "bias"), m.eps)

    @module('GroupNorm')
    def m_GroupNorm(self, q, m, x):
        return self.f_group_norm(x, m.num_groups, self._p(q, m, "weight"), self._p(q, m, "bias"), m.eps)

    @module('RMSNorm')
    def m_RMSNorm(self, q, m, x):
        return self.f_rms_norm(x, m.normalized_shape, self._p(q, m, "weight"), m.eps)

    @module('LocalResponseNorm')
    def m_LocalResponseNorm(self, q, m, x):
        raise UnsupportedOpError("LocalResponseNorm is not supported")

    # activations
    @module('ReLU')
    def m_ReLU(self, q, m, x):
        return self.f_relu(x)

    @module('LeakyReLU')
    def m_LeakyReLU(self, q, m, x):
        return self.f_leaky_relu(x, m.negative_slope)

    @module('GELU')
    def m_GELU(self, q, m, x):
        return self.f_gelu(x, m.approximate)

    @module('Sigmoid')
    def m_Sigmoid(self, q, m, x):
        return self.unary(x, UNARY["sigmoid"])

    @module('Tanh')
    def m_Tanh(self, q, m, x):
        return self.unary(x, UNARY["tanh"])

    @module('SiLU')
    def m_SiLU(self, q, m, x):
        return self.f_silu(x)

    @module('Mish')
    def m_Mish(self, q, m, x):
        return self.f_mish(x)

    @module('Hardswish')
    def m_Hardswish(self, q, m, x):
        return self.f_hardswish(x)

    @module('Hardsigmoid')
    def m_Hardsigmoid(self, q, m, x):
        return self.f_hardsigmoid(x)

    @module('Hardtanh')
    def m_Hardtanh(self, q, m, x):
        return self.f_hardtanh(x, m.min_val, m.max_val)

    @module('ReLU6')
    def m_ReLU6(self, q, m, x):
        return self.f_relu6(x)

    @module('ELU')
    def m_ELU(self, q, m, x):
        return self.f_elu(x, m.alpha)

    @module('CELU')
    def m_CELU(self, q, m, x):
        return self.f_celu(x, m.alpha)

    @module('SELU')
    def m_SELU(self, q, m, x):
        return self.f_selu(x)

    @module('Softplus')
    def m_Softplus(self, q, m, x):
        return self.f_softplus(x, m.beta, m.threshold)

    @module('Softsign')
    def m_Softsign(self, q, m, x):
        return self.f_softsign(x)

    @module('Tanhshrink')
    def m_Tanhshrink(self, q, m, x):
        return self.unary(x, UNARY["tanhshrink"])

    @module('Softshrink')
    def m_Softshrink(self, q, m, x):
        return self.f_softshrink(x, m.lambd)

    @module('Hardshrink')
    def m_Hardshrink(self, q, m, x):
        return self.f_hardshrink(x, m.lambd)

    @module('LogSigmoid')
    def m_LogSigmoid(self, q, m, x):
        return self.unary(x, UNARY["logsigmoid"])

    @module('Threshold')
    def m_Threshold(self, q, m, x):
        return self.f_threshold(x, m.threshold, m.value)

    @module('PReLU')
    def m_PReLU(self, q, m, x):
        return self.f_prelu(x, self._p(q, m, "weight"))

    @module('Softmax')
    def m_Softmax(self, q, m, x):
        return self._softmax(x, m.dim, False)

    @module('LogSoftmax')
    def m_LogSoftmax(self, q, m, x):
        return self._softmax(x, m.dim, True)

    @module('Softmin')
    def m_Softmin(self, q, m, x):
        return self._softmax(x, m.dim, False, neg=True)

    @module('Flatten')
    def m_Flatten(self, q, m, x):
        return Vs.flatten(x, m.start_dim, m.end_dim)

    @module('Unflatten')
    def m_Unflatten(self, q, m, x):
        return self.f_unflatten(x, m.dim, m.unflattened_size)

    def _dropout_mod(self, q, m, x):
        return self.f_dropout(x, m.p, m.training)

    m_Dropout = m_Dropout1d = m_Dropout2d = m_Dropout3d = m_AlphaDropout = module('Dropout', 'Dropout1d', 'Dropout2d', 'Dropout3d', 'AlphaDropout')(_dropout_mod)

    @module('ZeroPad2d')
    def m_ZeroPad2d(self, q, m, x):
        return self.f_pad(x, m.padding, "constant", 0.0)

    @module('ConstantPad1d')
    def m_ConstantPad1d(self, q, m, x):
        return self.f_pad(x, m.padding, "constant", m.value)

    m_ConstantPad2d = m_ConstantPad3d = module('ConstantPad2d', 'ConstantPad3d')(m_ConstantPad1d)

    # losses
    @module('MSELoss')
    def m_MSELoss(self, q, m, a, b):
        return self.f_mse_loss(a, b, reduction=m.reduction)

    @module('L1Loss')
    def m_L1Loss(self, q, m, a, b):
        return self.f_l1_loss(a, b, reduction=m.reduction)

    @module('SmoothL1Loss')
    def m_SmoothL1Loss(self, q, m, a, b):
        return self.f_smooth_l1_loss(a, b, reduction=m.reduction, beta=m.beta)

    @module('HuberLoss')
    def m_HuberLoss(self, q, m, a, b):
        return self.f_huber_loss(a, b, reduction=m.reduction, delta=m.delta)

    @module('KLDivLoss')
    def m_KLDivLoss(self, q, m, a, b):
        return self.f_kl_div(a, b, reduction=m.reduction, log_target=m.log_target)

    @module('HingeEmbeddingLoss')
    def m_HingeEmbeddingLoss(self, q, m, a, b):
        return self.f_hinge_embedding_loss(a, b, margin=m.margin, reduction=m.reduction)

    @module('CosineEmbeddingLoss')
    def m_CosineEmbeddingLoss(self, q, m, a, b, t):
        return self.f_cosine_embedding_loss(a, b, t, margin=m.margin, reduction=m.reduction)

    @module('TripletMarginLoss')
    def m_TripletMarginLoss(self, q, m, a, p, n):
        return self.f_triplet_margin_loss(a, p, n, margin=m.margin, p=m.p, eps=m.eps, swap=m.swap,
                                          reduction=m.reduction)

    @module('MarginRankingLoss')
    def m_MarginRankingLoss(self, q, m, a, b, t):
        return self.f_margin_ranking_loss(a, b, t, margin=m.margin, reduction=m.reduction)

    @module('SoftMarginLoss')
    def m_SoftMarginLoss(self, q, m, a, b):
        return self.f_soft_margin_loss(a, b, reduction=m.reduction)

    @module('BCELoss')
    def m_BCELoss(self, q, m, a, b):
        w = self._p(q, m, "weight")
        return self.f_binary_cross_entropy(a, b, w, reduction=m.reduction)

    @module('BCEWithLogitsLoss')
    def m_BCEWithLogitsLoss(self, q, m, a, b):
        return self.f_binary_cross_entropy_with_logits(a, b, reduction=m.reduction)

    @module('CrossEntropyLoss')
    def m_CrossEntropyLoss(self, q, m, a, b):
        if getattr(m, "weight", None) is not None:
            raise UnsupportedOpError("CrossEntropyLoss with class weights")
        return self.f_cross_entropy(a, b, ignore_index=m.ignore_index, reduction=m.reduction,
                                    label_smoothing=m.label_smoothing)

    @module('CosineSimilarity')
    def m_CosineSimilarity(self, q, m, a, b):
        return self.f_cosine_similarity(a, b, m.dim, m.eps)

    @module('PairwiseDistance')
    def m_PairwiseDistance(self, q, m, a, b):
        return self.f_pairwise_distance(a, b, m.norm, m.eps, m.keepdim)
