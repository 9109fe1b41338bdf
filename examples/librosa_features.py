"""librosa's mel spectrogram of a batch of waveforms, as features for a torch model.

librosa works on one NumPy waveform at a time; ``batched`` is the loop over the batch and
stacks the spectrograms into one tensor, in the waveforms' float32 and on their device.
"""

from __future__ import annotations

import librosa
import numpy as np
import torch

import autoconvert as ac


@ac.returns_tensor
@ac.accepts_numpy
def mel_spectrogram(waveform: np.ndarray, sample_rate: int) -> np.ndarray:
    """A 16-band log-mel spectrogram of one waveform."""
    power = librosa.feature.melspectrogram(y=waveform, sr=sample_rate, n_fft=512, hop_length=128, n_mels=16)
    return librosa.power_to_db(power)


def main() -> None:
    time = torch.arange(4000, dtype=torch.float32) / 8000
    waveforms = torch.stack([torch.sin(2 * torch.pi * f * time) for f in (220.0, 440.0, 880.0)])
    features = ac.batched(mel_spectrogram)(waveforms, 8000)
    assert features.shape == (3, 16, 32) and features.dtype == torch.float32
    loudest = features.mean(dim=2).argmax(dim=1)
    assert loudest.tolist() == sorted(loudest.tolist())  # higher tones peak in higher bands
    print(f"features {tuple(features.shape)} {features.dtype}; loudest band per tone {loudest.tolist()}")


if __name__ == "__main__":
    main()
