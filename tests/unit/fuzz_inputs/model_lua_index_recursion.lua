-- the model table answers every field by asking itself again
return setmetatable({}, {__index = function(t, k) return t[k] end})
