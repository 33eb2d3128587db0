def freeze(model, n_layers):
    for layer in list(model.layers)[:n_layers]:
        for p in layer.parameters():
            p.requires_gard = False  # expect: TB302
