"""Training: the job `nmt train` starts, the data a run trains on, the loop and its step, the
schedule, stopping, progress, TensorBoard, data-parallel processes, fine-tuning and measured precision."""
