-- lrc.hf — a Hugging Face config.json as a model's config.
--
-- lrc reads a model directory's config.json into a table (frontend/lua/hf.c),
-- hf.family picks the model file for its model_type (hf.find_families: the
-- files whose from_hf names it), and hf.map calls that model's
-- from_hf[model_type](r) with a reader r over the config. The
-- reader is strict: every key of config.json must be read by the family or
-- be one of the keys that do not change what the model computes; a key or
-- a value lrc does not implement ends in one line naming it.
local hf = {}

-- model_type -> { file = "models/llama.lua" or a path, builtin = BOOL }:
-- the model file whose from_hf names it, set by hf.find_families.
hf.families = {}

-- Keys that say nothing about the function the model computes.
local metadata = {
  architectures = true, model_type = true, torch_dtype = true, transformers_version = true,
  _name_or_path = true, bos_token_id = true, eos_token_id = true, pad_token_id = true,
  use_cache = true, initializer_range = true, max_position_embeddings = true,
  tokenizer_class = true, __array = true,
}

local function is_null(v) return type(v) == "userdata" end

local function show(v)
  if is_null(v) then return "null" end
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then
    local keys = {}
    for k in pairs(v) do if k ~= "__array" then keys[#keys + 1] = tostring(k) end end
    table.sort(keys)
    return "{" .. table.concat(keys, ", ") .. "}"
  end
  return tostring(v)
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

local Reader = {}
Reader.__index = Reader

-- A reader over table c; where names the file ("DIR/config.json") and
-- path the keys above c ("rope_scaling.").
local function reader(c, where, family, path)
  return setmetatable({ c = c, used = {}, where = where, family = family, path = path or "" }, Reader)
end

function Reader:fail(key, fmt, ...)
  error(string.format("%s: %s%s = %s: " .. fmt, self.where, self.path, key, show(self.c[key]), ...), 0)
end

-- The value of key, marked read; nil when absent or null (which
-- save_pretrained writes for an unset option: "rope_scaling": null).
function Reader:get(key)
  self.used[key] = true
  local v = self.c[key]
  if is_null(v) then return nil end
  return v
end

function Reader:has(key) return self.c[key] ~= nil and not is_null(self.c[key]) end

-- Whether config.json sets key to null (a family whose class default is
-- not None reads this: gemma2's "final_logit_softcapping": null is off).
function Reader:is_null(key) return is_null(self.c[key]) end

local function missing(self, key, what)
  error(string.format("%s: %s%s is missing (%s, needed for model_type %s)", self.where, self.path, key, what,
    self.family), 0)
end

-- The largest integer lrc takes from a config: its sizes and counts are C
-- ints, and a larger value (num_hidden_layers = 2^53) would only have lrc
-- build a graph for ever.
local MAX_INT = 2147483647
-- Counts of a model's structure past any checkpoint's (the deepest open
-- models have about 128 layers, the widest mixtures 256 experts), where a
-- config's value would have lrc build a graph for seconds to minutes
-- (65536 layers: 7 s; a million experts: 16 s) before anything could fail.
local MAX_COUNT = { num_hidden_layers = 4096, num_local_experts = 4096, num_experts = 4096 }

function Reader:int(key, default)
  local v = self:get(key)
  if v == nil then
    if default == nil then missing(self, key, "an integer") end
    return default
  end
  if math.type(v) ~= "integer" then self:fail(key, "expected an integer") end
  if v > MAX_INT or v < -MAX_INT then self:fail(key, "more than %d in magnitude, the largest integer lrc reads", MAX_INT) end
  if MAX_COUNT[key] and v > MAX_COUNT[key] then self:fail(key, "more than %d, the most lrc builds", MAX_COUNT[key]) end
  return v
end

function Reader:positive_int(key, default)
  local v = self:int(key, default)
  if v <= 0 then self:fail(key, "expected a positive integer") end
  return v
end

function Reader:number(key, default)
  local v = self:get(key)
  if v == nil then
    if default == nil then missing(self, key, "a number") end
    return default
  end
  if type(v) ~= "number" then self:fail(key, "expected a number") end
  return v + 0.0
end

function Reader:bool(key, default)
  local v = self:get(key)
  if v == nil then return default end
  if type(v) ~= "boolean" then self:fail(key, "expected true or false") end
  return v
end

-- A string among allowed (a list); absent gives default.
function Reader:one_of(key, allowed, default)
  local v = self:get(key)
  if v == nil then return default end
  for _, a in ipairs(allowed) do if v == a then return v end end
  self:fail(key, "lrc implements %s for model_type %s", table.concat(allowed, ", "), self.family)
end

-- The key may be absent or equal to one of the values lrc computes the same.
function Reader:only(key, ...)
  local v = self:get(key)
  if v == nil then return end
  for _, a in ipairs({ ... }) do if v == a then return end end
  local shown = {}
  for _, a in ipairs({ ... }) do shown[#shown + 1] = show(a) end
  self:fail(key, "lrc implements only %s for model_type %s", table.concat(shown, " or "), self.family)
end

-- A sub-reader over an object value, or nil when absent.
function Reader:object(key)
  local v = self:get(key)
  if v == nil then return nil end
  if type(v) ~= "table" or v.__array then self:fail(key, "expected an object") end
  return reader(v, self.where, self.family, self.path .. key .. ".")
end

-- Every key not read is an error, unless it is null (unset) or metadata
-- at the top level.
function Reader:finish()
  for _, k in ipairs(sorted_keys(self.c)) do
    -- __array: frontend/lua/hf.c's mark of an array or object, in every table
    if not self.used[k] and not is_null(self.c[k]) and k ~= "__array" and not (self.path == "" and metadata[k]) then
      self:fail(k, "not a key lrc implements for model_type %s", self.family)
    end
  end
end

-- hf.families from the model files: levels is a list, searched in order
-- (each folder of LRC_MODEL_PATH, then the built-in models), of lists of
-- { name = FILE, builtin = BOOL }; load(name, builtin) runs a file and gives
-- what it returned. A model_type goes to the first level that claims it,
-- so a user's file overrides a built-in family; two files of one level
-- claiming it is an error, as lrc could not tell which was meant.
function hf.find_families(levels, load)
  local families = {}
  for _, level in ipairs(levels) do
    local here = {}
    for _, f in ipairs(level) do
      local M = load(f.name, f.builtin)
      local types = {}
      if type(M) == "table" and type(M.from_hf) == "table" then
        for t in pairs(M.from_hf) do if type(t) == "string" then types[#types + 1] = t end end
      end
      table.sort(types)
      for _, t in ipairs(types) do
        if here[t] then
          error(string.format("%s and %s both claim model_type %s (from_hf.%s): keep one in that folder",
            here[t], f.name, t, t), 0)
        end
        here[t] = f.name
        families[t] = families[t] or { file = f.name, builtin = f.builtin }
      end
    end
  end
  hf.families = families
  return families
end

-- The model file for config c (read from where): its name and whether it
-- is built in.
function hf.family(c, where)
  local t = c.model_type
  if is_null(t) then t = nil end
  if t == nil then
    error(string.format("%s: model_type is missing (a Hugging Face config names its family)", where), 0)
  end
  if type(t) ~= "string" or not hf.families[t] then
    error(string.format("%s: model_type = %s is not supported (lrc runs %s; a model file on LRC_MODEL_PATH "
      .. "adds one)", where, show(t), table.concat(sorted_keys(hf.families), ", ")), 0)
  end
  return hf.families[t].file, hf.families[t].builtin
end

-- The config keys of model M for config c: M.from_hf[model_type](reader).
function hf.map(M, c, where)
  local fn = M.from_hf and M.from_hf[c.model_type]
  if not fn then
    error(string.format("%s: the model for model_type %s has no from_hf.%s", where, c.model_type, c.model_type), 0)
  end
  local r = reader(c, where, c.model_type)
  local cfg = fn(r)
  r:finish()
  return cfg
end

return hf
