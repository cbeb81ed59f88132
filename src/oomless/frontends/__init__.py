"""Front-ends shared by the framework adapters: launch scripts (bash, through bashlex), command
line flags, Hydra/OmegaConf configs and version numbers. Pure functions over text; nothing is
ever executed. Errors are `InputError`s naming the file and line."""
