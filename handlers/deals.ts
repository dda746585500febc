export const dealHandlers = {};
