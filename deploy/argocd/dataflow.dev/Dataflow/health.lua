-- Argo CD health of a dataflow.dev Dataflow (status written by dataflow-operator).
-- Healthy: Hydrated is True for the current generation. Degraded: Ready is False
-- (the spec is invalid: its reason and message). Progressing otherwise: not yet
-- observed, this generation not yet reconciled, or hydrating.
local hs = {status = "Progressing", message = "Waiting for the operator to observe the Dataflow"}

local function condition(conditions, kind)
  for _, c in ipairs(conditions or {}) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c)
  if c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason
end

if obj.status == nil then
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= generation then
  hs.message = "Generation " .. tostring(generation) .. " not yet observed"
  return hs
end
local ready = condition(obj.status.conditions, "Ready")
local hydrated = condition(obj.status.conditions, "Hydrated")
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(ready)
elseif hydrated ~= nil and hydrated.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(hydrated)
elseif hydrated ~= nil then
  hs.message = "Hydrating: " .. describe(hydrated)
end
return hs
